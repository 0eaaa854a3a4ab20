package web

import (
	"bufio"
	"bytes"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Role is what a login may do.
type Role string

const (
	RoleAdmin Role = "admin" // read, change the config, run tests
	RoleRead  Role = "read"  // read only
)

// hashIter is PBKDF2-SHA256's iteration count for new hashes. One check
// costs about 15 ms on this project's amd64 machine (BenchmarkCheck); a
// MIPS router core is some 20-40 times slower, so a login there takes
// around half a second: slow enough to make guessing from a stolen users
// file costly, bearable for a login. The standard library has PBKDF2, so
// no dependency is added for bcrypt or argon2. Stored hashes carry their
// own count, so it can be raised later.
const hashIter = 25_000

const hashPrefix = "pbkdf2-sha256$"

// HashPassword returns the stored form of a password or token:
// pbkdf2-sha256$ITERATIONS$SALT$KEY, salt and key in unpadded base64.
func HashPassword(pw string) (string, error) {
	if pw == "" {
		return "", errors.New("empty password")
	}
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key, err := pbkdf2.Key(sha256.New, pw, salt, hashIter, 32)
	if err != nil {
		return "", err
	}
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("%s%d$%s$%s", hashPrefix, hashIter, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

type storedHash struct {
	iter      int
	salt, key []byte
}

func parseHash(s string) (storedHash, error) {
	rest, ok := strings.CutPrefix(s, hashPrefix)
	if !ok {
		return storedHash{}, fmt.Errorf("not a %s...$ hash (make one with sqm passwd)", hashPrefix)
	}
	parts := strings.Split(rest, "$")
	if len(parts) != 3 {
		return storedHash{}, errors.New("want pbkdf2-sha256$ITERATIONS$SALT$KEY")
	}
	iter, err := strconv.Atoi(parts[0])
	if err != nil || iter < 1000 || iter > 10_000_000 {
		return storedHash{}, fmt.Errorf("iterations %q: want 1000..10000000", parts[0])
	}
	b64 := base64.RawStdEncoding
	salt, err1 := b64.DecodeString(parts[1])
	key, err2 := b64.DecodeString(parts[2])
	if err1 != nil || err2 != nil || len(salt) < 8 || len(key) != 32 {
		return storedHash{}, errors.New("salt or key is not valid unpadded base64 (salt >= 8 bytes, key 32)")
	}
	return storedHash{iter, salt, key}, nil
}

func (h storedHash) matches(pw string) bool {
	key, err := pbkdf2.Key(sha256.New, pw, h.salt, h.iter, len(h.key))
	return err == nil && subtle.ConstantTimeCompare(key, h.key) == 1
}

// Users are the logins the page accepts: one line per password or token,
// "ROLE HASH" with ROLE admin or read, # starts a comment.
type Users struct {
	entries []userEntry
}

type userEntry struct {
	role Role
	hash storedHash
}

// LoadUsers reads a users file. A file that anyone may read is refused:
// the hashes are salted and slow, but still open to offline guessing.
func LoadUsers(path string) (*Users, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o004 != 0 {
		return nil, fmt.Errorf("%s is readable by everyone; chmod 600 it", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseUsers(path, b)
}

// ParseUsers parses the users file format; name is used in errors.
func ParseUsers(name string, b []byte) (*Users, error) {
	u := &Users{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s:%d: want ROLE HASH (admin or read, then the hash sqm passwd prints)", name, n)
		}
		role := Role(f[0])
		if role != RoleAdmin && role != RoleRead {
			return nil, fmt.Errorf("%s:%d: role %q: use admin or read", name, n, f[0])
		}
		h, err := parseHash(f[1])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, n, err)
		}
		u.entries = append(u.entries, userEntry{role, h})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(u.entries) == 0 {
		return nil, fmt.Errorf("%s: no logins; add a line with sqm passwd", name)
	}
	return u, nil
}

// Check returns the role of the password, admin first if it matches both.
func (u *Users) Check(pw string) (Role, bool) {
	var got Role
	for _, e := range u.entries {
		if e.hash.matches(pw) && (got == "" || e.role == RoleAdmin) {
			got = e.role
		}
	}
	return got, got != ""
}

// session is one login. The CSRF token is per session and sent by the page
// in a header: a form on another site can neither read it nor set headers.
type session struct {
	role    Role
	csrf    string
	created time.Time // the login: the session ends sessionLife after it
	used    time.Time // the last request: it ends sessionIdle after it
}

// sessions is an in-memory table; a daemon restart logs everyone out, which
// is acceptable for a router page and keeps secrets off the flash. Each
// role has its own room of maxSessionsPerRole: when a role's room is full
// a login drops that role's least recently used session, so read-only
// logins (a token on a wall display, or a leaked one) never push out an
// admin's session.
type sessions struct {
	mu         sync.Mutex
	m          map[string]*session
	idle, life time.Duration
	now        func() time.Time
}

const (
	maxSessionsPerRole = 32
	// sessionIdle ends a session nobody uses (a closed tab); sessionLife
	// ends every session, however busy: an open page polls every few
	// seconds, and a stolen cookie must not work for ever.
	sessionIdle = time.Hour
	sessionLife = 12 * time.Hour
)

func newSessions(now func() time.Time) *sessions {
	return &sessions{m: map[string]*session{}, idle: sessionIdle, life: sessionLife, now: now}
}

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *sessions) expired(v *session, now time.Time) bool {
	return now.Sub(v.used) > s.idle || now.Sub(v.created) > s.life
}

func (s *sessions) create(r Role) (id string, ses *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	n := 0
	var lru string
	for k, v := range s.m {
		if s.expired(v, now) {
			delete(s.m, k)
			continue
		}
		if v.role != r {
			continue
		}
		n++
		if lru == "" || v.used.Before(s.m[lru].used) {
			lru = k
		}
	}
	if n >= maxSessionsPerRole {
		delete(s.m, lru)
	}
	id = randomToken()
	ses = &session{role: r, csrf: randomToken(), created: now, used: now}
	s.m[id] = ses
	return id, ses
}

func (s *sessions) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	ses := s.m[id]
	if ses == nil {
		return nil
	}
	now := s.now()
	if s.expired(ses, now) {
		delete(s.m, id)
		return nil
	}
	ses.used = now
	c := *ses
	return &c
}

func (s *sessions) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// NewToken returns a random login token (32 characters, 192 bits).
func NewToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

package web

import (
	"strings"
	"testing"
	"time"
)

func TestHashAndUsers(t *testing.T) {
	h, err := HashPassword("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := HashPassword("correct horse")
	if h == h2 {
		t.Error("two hashes of one password are equal: no salt")
	}
	u, err := ParseUsers("u", []byte("# logins\nread "+h+"\n\nadmin "+h2+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := u.Check("correct horse"); !ok || r != RoleAdmin {
		t.Errorf("Check = %v %v; want admin (admin wins when both match)", r, ok)
	}
	if _, ok := u.Check("correct horsE"); ok {
		t.Error("a wrong password matched")
	}
	for _, tc := range []struct{ in, want string }{
		{"", "no logins"},
		{"admin", "u:1: want ROLE HASH"},
		{"root " + h, `u:1: role "root"`},
		{"admin plain", "u:1: not a pbkdf2-sha256"},
		{"admin pbkdf2-sha256$10$AAAAAAAAAAA$" + strings.Repeat("A", 43), "u:1: iterations"},
		{"admin pbkdf2-sha256$100000$!!$" + strings.Repeat("A", 43), "u:1: salt or key"},
		{"admin pbkdf2-sha256$100000$AAAAAAAAAAA", "u:1: want pbkdf2"},
	} {
		if _, err := ParseUsers("u", []byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want %q", tc.in, err, tc.want)
		}
	}
}

// TestSessionsExpire: a session ends sessionIdle after its last use, and
// sessionLife after the login however often it is used (an open page polls
// every few seconds: with only the idle expiry it would never end).
func TestSessionsExpire(t *testing.T) {
	now := time.Unix(1000, 0)
	s := newSessions(func() time.Time { return now })
	id, ses := s.create(RoleRead)
	if g := s.get(id); g == nil || g.csrf != ses.csrf {
		t.Fatal("fresh session not found")
	}
	now = now.Add(s.idle + time.Second)
	if s.get(id) != nil {
		t.Error("idle session still valid")
	}

	// A page polling every 5 s: valid until the absolute lifetime.
	id, _ = s.create(RoleAdmin)
	login := now
	for now.Sub(login) < s.life-5*time.Second {
		now = now.Add(5 * time.Second)
		if s.get(id) == nil {
			t.Fatalf("polled session ended %v after login; want %v", now.Sub(login), s.life)
		}
	}
	now = login.Add(s.life + time.Second)
	if s.get(id) != nil {
		t.Errorf("session polled every 5 s still valid %v after login; lifetime is %v", now.Sub(login), s.life)
	}
}

// TestSessionsRolesApart: read-only logins fill only their own room; the
// admin's session survives any number of them. Before the fix 64 read-only
// logins evicted it.
func TestSessionsRolesApart(t *testing.T) {
	now := time.Unix(1000, 0)
	s := newSessions(func() time.Time { return now })
	admin, _ := s.create(RoleAdmin)
	for i := 0; i < 10*maxSessionsPerRole; i++ {
		now = now.Add(time.Second)
		s.create(RoleRead)
	}
	if s.get(admin) == nil {
		t.Fatalf("%d read-only logins evicted the admin's session", 10*maxSessionsPerRole)
	}
	if len(s.m) != maxSessionsPerRole+1 {
		t.Errorf("%d sessions kept; want %d read-only and the admin's", len(s.m), maxSessionsPerRole)
	}
	// Within a role the least recently used goes: the first admin
	// session, used just now, stays while others are added.
	for i := 0; i < maxSessionsPerRole; i++ {
		now = now.Add(time.Second)
		s.create(RoleAdmin)
		s.get(admin)
	}
	if s.get(admin) == nil {
		t.Error("the admin session in use was evicted by newer admin logins")
	}
}

func FuzzParseUsers(f *testing.F) {
	h, _ := HashPassword("seed-password")
	f.Add("admin " + h + "\n")
	f.Add("# c\nread pbkdf2-sha256$1000$AAAAAAAAAAA$" + strings.Repeat("A", 43))
	f.Add("admin pbkdf2-sha256$$$")
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseUsers("f", []byte(s))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if len(u.entries) == 0 {
			t.Fatal("nil error with no logins")
		}
	})
}

// BenchmarkCheck is one login's cost (hashIter PBKDF2-SHA256 rounds).
func BenchmarkCheck(b *testing.B) {
	h, _ := HashPassword("benchmark password")
	u, _ := ParseUsers("u", []byte("admin "+h))
	for b.Loop() {
		u.Check("benchmark password")
	}
}

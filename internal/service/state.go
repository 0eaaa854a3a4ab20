package service

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sqm/internal/config"
	"sqm/internal/json"
)

// StateVersion is bumped when State changes incompatibly; older files are
// then treated as unreadable and reported, never guessed at.
const StateVersion = 1

// SourceCLI is the Source of state written by `sqm apply` (no config file).
const SourceCLI = "cli"

// State is what sqm installed on one interface. It is written only after the
// kernel accepted the whole plan, so it is the authority for `sqm stop`: stop
// removes exactly State.Owned, nothing it merely guesses is sqm's.
type State struct {
	Version   int    `json:"version"`
	Interface string `json:"interface"`
	// Source is the config file the section came from, or SourceCLI.
	Source  string `json:"source"`
	Section string `json:"section"`
	// SectionPos is where the section was written ("file:line").
	SectionPos string    `json:"section_pos,omitempty"`
	AppliedAt  time.Time `json:"applied_at"`
	PID        int       `json:"pid"`
	// Queue is the section as applied, so the plan can be rebuilt for
	// checks and restores even after the config file changed.
	Queue config.Queue `json:"queue"`
	// Plan is the applied plan as JSON, compared byte for byte with a
	// fresh plan to tell whether a section changed.
	Plan json.RawMessage `json:"plan"`
	// Owned is what sqm created, including the applied plan, which the
	// kernel rebuilds if a later apply fails half-way.
	Owned Owned `json:"owned"`
}

// pending is written before the kernel is touched and removed after the
// state is saved (or the apply failed cleanly). A pending file that
// survives means an sqm died mid-apply (kill -9, power loss): what is in the
// kernel may be half of sqm's tree that no State describes, so the next
// apply on that interface replaces it (ApplyOptions.Force).
type pending struct {
	Interface string          `json:"interface"`
	PID       int             `json:"pid"`
	Started   time.Time       `json:"started"`
	Source    string          `json:"source,omitempty"`
	Plan      json.RawMessage `json:"plan"`
	// IFB is an IFB this apply may create (or an interrupted one left)
	// that no state records: the next apply takes it as sqm's, so stop
	// removes it. Without this, a kill between the IFB's creation and the
	// state's save left an IFB that later applies refused as foreign.
	IFB string `json:"ifb,omitempty"`
}

// Store keeps one JSON file per interface in a directory (default /run/sqm,
// a tmpfs: shaping does not survive a reboot, and neither should its state).
type Store struct {
	Dir string
}

func (s *Store) statePath(iface string) string {
	return filepath.Join(s.Dir, iface+".state.json")
}

func (s *Store) pendingPath(iface string) string {
	return filepath.Join(s.Dir, iface+".pending.json")
}

// checkIfaceName refuses names that would escape the state directory or
// that the kernel could never have created: config.CheckIfName, the same
// rule the config reader applies.
func checkIfaceName(iface string) error {
	return config.CheckIfName(iface)
}

// Load returns the state of iface, or nil if sqm has not shaped it.
func (s *Store) Load(iface string) (*State, error) {
	if err := checkIfaceName(iface); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return s.read(s.statePath(iface))
}

func (s *Store) read(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state: read %s: %w", path, err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("state: %s is corrupt: %w; check what is installed with 'sqm status', then delete the file", path, err)
	}
	if st.Version != StateVersion {
		return nil, fmt.Errorf("state: %s has version %d, this sqm reads version %d; stop shaping with the sqm that wrote it, or delete the file", path, st.Version, StateVersion)
	}
	return &st, nil
}

// All returns every state, sorted by interface.
func (s *Store) All() ([]*State, error) {
	names := s.list(".state.json")
	var out []*State
	var errs []error
	for _, n := range names {
		st, err := s.read(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if st != nil {
			out = append(out, st)
		}
	}
	return out, errors.Join(errs...)
}

// Save writes st atomically: readers see the old file or the new one, never
// half of one, even if sqm is killed while writing.
func (s *Store) Save(st *State) error {
	if err := checkIfaceName(st.Interface); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	st.Version = StateVersion
	return s.writeJSON(s.statePath(st.Interface), st)
}

func (s *Store) writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("state: encode %s: %w", path, err)
	}
	return s.writeFile(path, append(b, '\n'), true)
}

// writeFile replaces path with b: a temporary file renamed over it, so a
// reader sees the old file or the new one, never part of one. durable
// syncs it first, for state a crash must not lose; a status the daemon
// rewrites several times a second (IFACE.autorate.json) needs no sync.
func (s *Store) writeFile(path string, b []byte, durable bool) error {
	if err := EnsureStateDir(s.Dir); err != nil {
		return err
	}
	f, err := os.CreateTemp(s.Dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("state: write %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("state: write %s: %w", path, err)
	}
	return nil
}

// Delete forgets iface's state; a missing file is not an error.
func (s *Store) Delete(iface string) error {
	if err := checkIfaceName(iface); err != nil {
		return fmt.Errorf("state: %w", err)
	}
	if err := os.Remove(s.statePath(iface)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("state: %w", err)
	}
	return nil
}

func (s *Store) markPending(iface, source string, p json.RawMessage, now time.Time, ifb string) error {
	return s.writeJSON(s.pendingPath(iface), &pending{Interface: iface, PID: os.Getpid(), Started: now, Source: source, Plan: p, IFB: ifb})
}

// Interrupted is an apply that never finished on an interface no state
// describes, as `sqm status` shows it.
type Interrupted struct {
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Source  string    `json:"source,omitempty"`
	IFB     string    `json:"ifb,omitempty"` // the IFB it claimed
}

// Interrupted lists the interrupted first applies by interface: what they
// built is in the kernel with no state; `sqm start` finishes it, `sqm
// stop` removes it.
func (s *Store) Interrupted() (map[string]Interrupted, error) {
	ps, err := s.orphans()
	out := map[string]Interrupted{}
	for i, p := range ps {
		out[i] = Interrupted{PID: p.PID, Started: p.Started, Source: p.Source, IFB: p.IFB}
	}
	return out, err
}

// list returns the sorted paths of the files in the state directory
// whose names end in suffix: what filepath.Glob(filepath.Join(s.Dir,
// "*"+suffix)) returned, without Glob's pattern matcher (5 KB of the
// router build on mipsle). As with Glob, a directory that cannot be read
// (or is missing) lists nothing; unlike Glob, a directory whose name has
// *, ? or [ in it is taken as it is.
func (s *Store) list(suffix string) []string {
	dir := s.Dir
	if dir == "" {
		dir = "."
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, suffix) {
			out = append(out, filepath.Join(s.Dir, n))
		}
	}
	slices.Sort(out)
	return out
}

// orphans are the records of interrupted applies on interfaces that no
// state describes: a first apply killed before it saved one. What such an
// apply built, nothing else records.
func (s *Store) orphans() (map[string]*pending, error) {
	out := map[string]*pending{}
	for _, n := range s.list(".pending.json") {
		iface := strings.TrimSuffix(filepath.Base(n), ".pending.json")
		if checkIfaceName(iface) != nil {
			continue
		}
		if _, err := os.Stat(s.statePath(iface)); err == nil {
			continue
		}
		if p := s.interrupted(iface); p != nil {
			p.Interface = iface
			out[iface] = p
		}
	}
	return out, nil
}

func (s *Store) clearPending(iface string) {
	os.Remove(s.pendingPath(iface))
}

// interrupted returns the record of an apply on iface that never finished,
// or nil.
func (s *Store) interrupted(iface string) *pending {
	b, err := os.ReadFile(s.pendingPath(iface))
	if err != nil {
		return nil
	}
	var p pending
	if json.Unmarshal(b, &p) != nil {
		return &pending{Interface: iface}
	}
	return &p
}

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

// Refused is an enabled section the last start, reload or daemon pass over
// its config refused (it does not parse, or it cannot be planned), as `sqm
// status` and the daemon's page show it: the other sections were shaped
// without it, and its interface kept what it had.
type Refused struct {
	Source     string    `json:"source"`
	Section    string    `json:"section"`
	Interface  string    `json:"interface,omitempty"`
	SectionPos string    `json:"section_pos,omitempty"`
	Errors     []string  `json:"errors"`
	At         time.Time `json:"at"`
}

func (s *Store) refusedPath() string { return filepath.Join(s.Dir, "refused.json") }

// Refused returns the refused sections of every source, in the order they
// were recorded.
func (s *Store) Refused() ([]Refused, error) {
	b, err := os.ReadFile(s.refusedPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state: read %s: %w", s.refusedPath(), err)
	}
	var rs []Refused
	if err := json.Unmarshal(b, &rs); err != nil {
		return nil, fmt.Errorf("state: %s is corrupt: %w; the next 'sqm start' or daemon reload rewrites it", s.refusedPath(), err)
	}
	return rs, nil
}

// saveRefused replaces source's records with rs (none: forget them).
func (s *Store) saveRefused(source string, rs []Refused) error {
	old, err := s.Refused()
	if err != nil {
		old = nil // corrupt: rewritten from scratch
	}
	keep := slices.DeleteFunc(old, func(r Refused) bool { return r.Source == source })
	all := append(keep, rs...)
	if len(all) == 0 {
		if err := os.Remove(s.refusedPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("state: %w", err)
		}
		return nil
	}
	return s.writeJSON(s.refusedPath(), all)
}

// refusedOutcome is the report line of a refused section.
func refusedOutcome(r *config.SectionError) Outcome {
	return Outcome{Interface: r.Interface, Section: r.Section, Action: ActRefused,
		Detail: fmt.Sprintf("not started (%s has errors, reported below); the interface keeps what it had", r.Pos)}
}

// recordRefused notes the refused sections of an unfiltered run over
// source, for status; a run over some interfaces only saw some of them.
func (s *Service) recordRefused(source string, o PrepareOptions, rs []*config.SectionError) {
	if len(o.Ifaces) > 0 || source == "" || source == SourceCLI {
		return
	}
	recs := make([]Refused, 0, len(rs))
	for _, r := range rs {
		var msgs []string
		for _, e := range r.Errs {
			msgs = append(msgs, strings.TrimSpace(e.Error()))
		}
		recs = append(recs, Refused{Source: source, Section: r.Section, Interface: r.Interface,
			SectionPos: r.Pos.String(), Errors: msgs, At: s.now().UTC()})
	}
	if err := s.Store.saveRefused(source, recs); err != nil {
		s.log().Warn("cannot record the refused sections for sqm status", "err", err)
	}
}

// refusedErr is the error a run returns for its refused sections, after it
// applied the others.
func refusedErr(rs []*config.SectionError) error {
	return config.JoinRefused(rs, "the other sections were shaped (fix the section and run 'sqm reload', or let the daemon pick up the change)")
}

// forgetRefused drops source's records (every source's when "").
func (s *Service) forgetRefused(source string) {
	rs, _ := s.Store.Refused()
	if len(rs) == 0 {
		return
	}
	var keep []Refused
	if source != "" {
		keep = slices.DeleteFunc(rs, func(r Refused) bool { return r.Source == source })
	}
	err := os.Remove(s.Store.refusedPath())
	if len(keep) > 0 {
		err = s.Store.writeJSON(s.Store.refusedPath(), keep)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log().Warn("cannot update the record of refused sections", "err", err)
	}
}

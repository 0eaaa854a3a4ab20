package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sqm/internal/config"
	"sqm/internal/httpd"
	"sqm/internal/plan"
	"sqm/internal/uci"
)

// configSection is one `config queue` section as the form shows it: the
// options as written (strings, as in the file), not the defaults resolved,
// so that saving writes back only what the user changed.
type configSection struct {
	Ref     string            `json:"ref"`
	Name    string            `json:"name"`
	Line    int               `json:"line"`
	Options map[string]string `json:"options"`
}

type configReply struct {
	Path     string          `json:"path"`
	Sections []configSection `json:"sections"`
	Scripts  []string        `json:"scripts"`
	Qdiscs   []string        `json:"qdiscs"`
	// Interfaces are the devices the router has, for the form's picker.
	Interfaces []string `json:"interfaces"`
	Warnings   []string `json:"warnings,omitempty"`
	Error      string   `json:"error,omitempty"` // the file as it is does not parse
}

func (s *Server) getConfig(w httpd.ResponseWriter, r *httpd.Request, _ *session) {
	src, err := os.ReadFile(s.ConfigPath)
	if err != nil {
		jsonError(w, httpd.StatusInternalServerError, err.Error())
		return
	}
	rep := configReply{Path: s.ConfigPath, Sections: []configSection{}}
	for _, sc := range config.Scripts() {
		rep.Scripts = append(rep.Scripts, sc+".qos")
	}
	if s.Qdiscs != nil {
		rep.Qdiscs = s.Qdiscs()
	}
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			if i.Flags&net.FlagLoopback == 0 {
				rep.Interfaces = append(rep.Interfaces, i.Name)
			}
		}
	}
	u, err := uci.Parse(s.ConfigPath, bytes.NewReader(src))
	if err != nil {
		rep.Error = err.Error()
		writeJSON(w, httpd.StatusOK, rep)
		return
	}
	for _, sec := range u.SectionsOfType("queue") {
		cs := configSection{Ref: sec.Ref(), Name: sec.Name, Line: sec.Line, Options: map[string]string{}}
		for _, o := range sec.Options {
			cs.Options[o.Name] = o.Value()
		}
		rep.Sections = append(rep.Sections, cs)
	}
	if f, err := config.Parse(s.ConfigPath, bytes.NewReader(src)); err != nil {
		rep.Error = err.Error()
	} else {
		for _, wn := range f.Warnings {
			rep.Warnings = append(rep.Warnings, wn.String())
		}
	}
	writeJSON(w, httpd.StatusOK, rep)
}

// fieldError is one problem the form shows next to its field.
type fieldError struct {
	Section string `json:"section,omitempty"`
	Option  string `json:"option,omitempty"`
	Message string `json:"message"`
}

type saveReply struct {
	OK         bool         `json:"ok"`
	Errors     []fieldError `json:"errors,omitempty"`
	Outcomes   []string     `json:"outcomes,omitempty"`
	RolledBack bool         `json:"rolled_back,omitempty"`
}

// maxSetOptions bounds the options one change may set: the form has
// fewer than 50, and each costs work under cfgMu.
const maxSetOptions = 64

// postConfig changes options of one queue section, adds one (disabled,
// for the user to fill in) or deletes one: edited in the file's text
// (comments and unknown options stay), checked with the CLI's own parser
// and planner, written, and applied by the daemon; if the kernel refuses
// it, the old file is put back and re-applied. Only queue sections, what
// the page shows: the daemon's own section (its listen address, logins,
// certificate) or another package's could lock the owner out or stop the
// next daemon start, which stops the shaping.
func (s *Server) postConfig(w httpd.ResponseWriter, r *httpd.Request, _ *session) {
	var req struct {
		Section string            `json:"section"`
		Set     map[string]string `json:"set"`
		Add     string            `json:"add"`    // name of a new queue section
		Delete  bool              `json:"delete"` // remove Section
	}
	if !readJSON(w, r, &req) {
		return
	}
	ops := 0
	for _, b := range []bool{len(req.Set) > 0, req.Add != "", req.Delete} {
		if b {
			ops++
		}
	}
	if ops != 1 {
		jsonError(w, httpd.StatusBadRequest, "give exactly one of set (with section), add, or delete (with section)")
		return
	}
	if len(req.Set) > maxSetOptions {
		jsonError(w, httpd.StatusBadRequest, fmt.Sprintf("%d options in one change; at most %d", len(req.Set), maxSetOptions))
		return
	}
	if s.tuning() {
		// The tune holds the shaping (and the state lock the daemon
		// applies under) until it ends: the change could not be applied.
		writeJSON(w, httpd.StatusConflict, saveReply{Errors: []fieldError{{Section: req.Section, Message: errTuneBusy.Error()}}})
		return
	}
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	old, err := os.ReadFile(s.ConfigPath)
	if err != nil {
		jsonError(w, httpd.StatusInternalServerError, err.Error())
		return
	}
	if req.Add == "" {
		if code, msg := queueSection(s.ConfigPath, old, req.Section); msg != "" {
			writeJSON(w, code, saveReply{Errors: []fieldError{{Section: req.Section, Message: msg}}})
			return
		}
	}
	var nu []byte
	var what string
	switch {
	case req.Add != "":
		what = "added section " + req.Add
		nu, err = uci.AddSection(s.ConfigPath, old, "queue", req.Add, [][2]string{{"enabled", "0"}})
	case req.Delete:
		what = "deleted section " + req.Section
		nu, err = uci.DeleteSection(s.ConfigPath, old, req.Section)
	default:
		names := make([]string, 0, len(req.Set))
		for k := range req.Set {
			names = append(names, k)
		}
		sort.Strings(names)
		edits := make([]uci.Edit, 0, len(names))
		for _, k := range names {
			edits = append(edits, uci.Edit{Section: req.Section, Option: k, Value: strings.TrimSpace(req.Set[k])})
		}
		what = "section " + req.Section + " options " + strings.Join(names, ",")
		nu, err = uci.Apply(s.ConfigPath, old, edits)
	}
	if err != nil {
		writeJSON(w, httpd.StatusBadRequest, saveReply{Errors: []fieldError{{Section: req.Section, Message: err.Error()}}})
		return
	}
	code, rep := s.commit(r.Context(), req.Section, old, nu, what)
	writeJSON(w, code, rep)
}

// queueSection checks that ref names a queue section of src; otherwise
// the status and message to refuse the change with.
func queueSection(name string, src []byte, ref string) (int, string) {
	u, err := uci.Parse(name, bytes.NewReader(src))
	if err != nil {
		return httpd.StatusBadRequest, err.Error()
	}
	sec := u.Lookup(ref)
	if sec == nil || ref == "" {
		return httpd.StatusBadRequest, fmt.Sprintf("%s: no section %q", name, ref)
	}
	if sec.Type != "queue" {
		return httpd.StatusForbidden, fmt.Sprintf("%s:%d: section %s is a %q section; the page changes only queue sections (edit the daemon's own settings on the router)", name, sec.Line, ref, sec.Type)
	}
	return 0, ""
}

// commit replaces the config file's text old with nu, after the checks
// `sqm start` would make, and has the daemon apply it; if the kernel
// refuses it, the old file is put back and applied again. cfgMu is held.
func (s *Server) commit(ctx context.Context, section string, old, nu []byte, what string) (int, saveReply) {
	if errs := validate(s.ConfigPath, nu); len(errs) > 0 {
		return httpd.StatusBadRequest, saveReply{Errors: errs}
	}
	if bytes.Equal(nu, old) {
		return httpd.StatusOK, saveReply{OK: true}
	}
	if err := writeAtomic(s.ConfigPath, nu); err != nil {
		return httpd.StatusInternalServerError, saveReply{Errors: []fieldError{{Message: err.Error()}}}
	}
	s.log().Info("web: config changed", "change", what, "config", s.ConfigPath)
	if s.Apply == nil {
		return httpd.StatusOK, saveReply{OK: true, Outcomes: []string{"written; no daemon to apply it"}}
	}
	outs, aerr := s.Apply(ctx)
	rep := saveReply{OK: aerr == nil, Outcomes: outs}
	if aerr != nil {
		rep.Errors = []fieldError{{Section: section, Message: "not applied: " + aerr.Error()}}
		if err := writeAtomic(s.ConfigPath, old); err != nil {
			rep.Errors = append(rep.Errors, fieldError{Message: "putting the old config back failed: " + err.Error()})
		} else if _, err := s.Apply(context.WithoutCancel(ctx)); err != nil {
			rep.Errors = append(rep.Errors, fieldError{Message: "re-applying the old config: " + err.Error()})
		}
		rep.RolledBack = true
		s.log().Warn("web: change not applied; old config restored", "err", aerr)
		return httpd.StatusConflict, rep
	}
	return httpd.StatusOK, rep
}

// validate is what `sqm start` would say about the file: config.Parse's
// errors, then the plan of every enabled section (qdisc option strings are
// only checked there). Each error is tied to its section and option when
// the parser says which.
func validate(name string, src []byte) []fieldError {
	f, err := config.Parse(name, bytes.NewReader(src))
	if err != nil {
		return fieldErrors(err)
	}
	var out []fieldError
	for i := range f.Queues {
		q := &f.Queues[i]
		if !q.Enabled {
			continue
		}
		if _, err := plan.Build(q, plan.Env{MTU: 1500}); err != nil {
			fe := fieldErrors(err)
			for j := range fe {
				if fe[j].Section == "" {
					fe[j].Section = q.Name
				}
			}
			out = append(out, fe...)
		}
	}
	return out
}

func fieldErrors(err error) []fieldError {
	var out []fieldError
	for _, e := range errorList(err) {
		var oe *config.OptionError
		if errors.As(e, &oe) {
			out = append(out, fieldError{Section: oe.Section, Option: oe.Option, Message: oe.Msg})
			continue
		}
		out = append(out, fieldError{Message: e.Error()})
	}
	return out
}

// writeAtomic replaces path with b through a temporary file in the same
// directory, keeping the old file's mode: a crash or full flash mid-write
// leaves the old config, never half a file.
func writeAtomic(path string, b []byte) error {
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".web-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}

package tune

import (
	"fmt"
	"strconv"
	"strings"

	"sqm/internal/uci"
)

// Edits are the config changes that put the chosen rates into section
// (a name or @queue[N]), and the framing when tune detected it (the rates
// were measured with it; they belong together). A configured framing is
// the user's and stays as written.
func (r *Result) Edits(section string) []uci.Edit {
	e := []uci.Edit{
		{Section: section, Option: "download", Value: strconv.Itoa(r.DownloadKbit)},
		{Section: section, Option: "upload", Value: strconv.Itoa(r.UploadKbit)},
	}
	if r.LinklayerSource == "detected" {
		e = append(e,
			uci.Edit{Section: section, Option: "linklayer", Value: r.Linklayer},
			uci.Edit{Section: section, Option: "overhead", Value: strconv.Itoa(r.Overhead)})
	}
	return e
}

// WriteConfig returns src (a UCI file named name) with the chosen rates in
// section. uci.Apply edits the option lines in place and checks each edit
// by parsing, so comments, order and options sqm does not know come back
// byte-identical; what it cannot edit safely it refuses, naming the line.
func (r *Result) WriteConfig(name string, src []byte, section string) ([]byte, error) {
	if r.DownloadKbit <= 0 || r.UploadKbit <= 0 {
		return nil, fmt.Errorf("tune: no rates chosen (%d/%d kbit/s); nothing written", r.DownloadKbit, r.UploadKbit)
	}
	return uci.Apply(name, src, r.Edits(section))
}

// UCICommands are the `uci` lines a user can paste on OpenWrt instead of
// --write (uci commit rewrites the file and drops its comments).
func (r *Result) UCICommands(config, section string) string {
	var b strings.Builder
	for _, e := range r.Edits(section) {
		fmt.Fprintf(&b, "uci set %s.%s.%s='%s'\n", config, section, e.Option, e.Value)
	}
	fmt.Fprintf(&b, "uci commit %s\n", config)
	return b.String()
}

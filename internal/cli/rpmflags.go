//go:build !sqm_notest

package cli

import "flag"

// rpmTestFlags are `sqm test`'s flags for a responsiveness (RPM) test
// against any server of the IETF draft, kept here so test.go only hooks
// them in.
type rpmTestFlags struct {
	url       string
	insecure  bool
	caFile    string
	direction string
}

func (r *rpmTestFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.url, "rpm", "", "measure responsiveness (RPM, IETF draft) against a responsiveness server instead: its `URL` or host (configuration at /.well-known/nq)")
	fs.BoolVar(&r.insecure, "insecure", false, "--rpm: do not verify the server's certificate (needed for a self-signed 'sqm server --rpm')")
	fs.StringVar(&r.caFile, "ca", "", "--rpm: trust only the CA certificates in `file` (PEM) for the server")
	fs.StringVar(&r.direction, "rpm-load", "both", "--rpm: load `direction`: both (at once), down or up")
}

// rpmCompanions are the flags that only mean something with --rpm.
var rpmCompanions = []string{"insecure", "ca", "rpm-load"}

// rpmAllowed are the flags that mean something for an RPM test.
var rpmAllowed = map[string]bool{"rpm": true, "insecure": true, "ca": true, "rpm-load": true,
	"duration": true, "4": true, "6": true, "json": true, "quiet": true, "secret": true, "secret-file": true}

// rpmServerFlags are `sqm server`'s flags for serving the responsiveness
// endpoints next to its own protocol.
type rpmServerFlags struct {
	addr, cert, key string
}

func (r *rpmServerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.addr, "rpm", "", "also serve responsiveness (RPM) clients over HTTPS/HTTP2 on `ADDR` (e.g. :4443): /.well-known/nq and its three objects")
	fs.StringVar(&r.cert, "rpm-cert", "", "--rpm: TLS certificate `file` (PEM; default: a self-signed one made at start, so clients need --insecure)")
	fs.StringVar(&r.key, "rpm-key", "", "--rpm: private key `file` (PEM) of --rpm-cert")
}

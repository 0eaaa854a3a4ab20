// Package config turns /etc/config/sqm into [Queue] values with every option
// resolved as sqm-scripts' run.sh and defaults.sh resolve it, so the planner
// and the service never look at raw strings or re-apply defaults. It reads
// UCI through package uci and values through package units, and imports
// nothing that talks to the kernel.
//
// # Options of `config queue` sections
//
//	option                          field          unset/empty       accepted values
//	enabled                         Enabled        false             0, 1 (only 1 enables)
//	interface                       Interface      "" (required*)    1..15 chars, no '/', ':', space
//	download                        Download       14698             kbit/s, digits only, <= MaxKbit
//	upload                          Upload         2302              kbit/s, digits only, <= MaxKbit
//	qdisc                           Qdisc          fq_codel          [a-z0-9_]+ (any tc qdisc kind)
//	script                          Script         "" (required*)    Scripts, with or without .qos
//	squash_dscp                     SquashDSCP     true              0, 1
//	squash_ingress                  SquashIngress  true              0, 1
//	ingress_ecn                     IngressECN     true (ECN)        ECN, NOECN (also ecn, noecn)
//	egress_ecn                      EgressECN      true (ECN)        ECN, NOECN (also ecn, noecn)
//	ilimit, elimit                  ILimit, ELimit 0 (= 1001)        0..2^32-1 packets (bytes for bfifo); 0 is the default, with a warning
//	itarget, etarget                ITarget, ...   auto              auto/Auto/AUTO, default/Default/DEFAULT,
//	                                                                 <number><unit>, unit s|sec|secs|ms|msec|msecs|us|usec|usecs,
//	                                                                 at most MaxTarget (2^32-1 us)
//	iqdisc_opts, eqdisc_opts        *QdiscOpts     ""                free text (the planner parses it)
//	linklayer                       LinkLayer      none              none, ethernet, atm, adsl (stored as atm)
//	overhead                        Overhead       0                 -1500..1500 (MinOverhead..MaxOverhead)
//	tcMTU                           StabMTU        2047              0..65536 (MaxStabMTU; 0: 2047)
//	tcTSIZE                         StabTSize      512               0..32749 (MaxStabTSize; 0: 512)
//	tcMPU                           StabMPU        0                 0..65535 (MaxMPU)
//	linklayer_adaptation_mechanism  LLAM           default           default, cake, htb_private, tc_stab
//	debug_logging                   DebugLogging   false             0, 1
//	verbosity                       Verbosity      5                 0, 1, 2, 5, 8, 10
//
// (*) required only in enabled sections: sqm-scripts never reads disabled ones.
//
// # Autorate options (sqm's own; sqm-scripts ignores them)
//
// The daemon follows a link whose capacity moves (issue 26); download and
// upload stay the base rates, so a section without these shapes as before.
// The defaults and why they are what they are: autorate.go.
//
//	option                 field                 unset/empty          accepted values
//	autorate               Autorate.Enabled      0 (off)              0, 1
//	autorate_download_min  Autorate.DownloadMin  download/4 (>= 64)   kbit/s, 64..download
//	autorate_download_max  Autorate.DownloadMax  download*2           kbit/s, download..MaxKbit
//	autorate_upload_min    Autorate.UploadMin    upload/4 (>= 64)     kbit/s, 64..upload
//	autorate_upload_max    Autorate.UploadMax    upload*2             kbit/s, upload..MaxKbit
//	autorate_target        Autorate.Target       15 (ms)              1..1000 ms: 7.5 (ms) or with a unit (7500us)
//	autorate_reflector     Autorate.Reflectors   [] (probe default)   list of IP, [IPv6]:port, host or host:port, at most 32
//	autorate_probe         Autorate.Probe        both                 icmp, udp, both
//
// The ranges (min <= base <= max, at least 64 kbit/s) are checked only
// with autorate 1; a direction with rate 0 (not shaped) cannot autorate
// and giving it a minimum or maximum is an error. The planner refuses
// autorate on a policed download (police, codel_police): a policer has
// no shaper whose rate could be changed in place.
//
// # One section, one verdict
//
// Each `config queue` section stands on its own, as in sqm-scripts'
// run-openwrt.sh: an enabled section with any problem is refused
// (File.Refused: a [SectionError] with every problem and its file:line),
// the other sections are in File.Queues, and a disabled section's bad
// values are only warnings. Parse's error is then File.Err(); only a file
// that is not UCI returns no File. Callers that shape what they can
// (start, reload, the daemon) use the File and report the refusals; the
// web page, which checks a file before writing it, takes the error.
//
// Accepted and ignored, as in sqm-scripts: qdisc_advanced,
// qdisc_really_really_advanced, linklayer_advanced (LuCI gates), target
// (exported but unused), shaper_burst and htb_quantum_function (read by old
// releases). Any other option yields a [Warning]. Sections of other types
// (such as the daemon's own `sqm` section) are ignored without warnings and
// left in File.UCI for their owners.
//
// # Verification
//
// TestSQMScriptsDifferential runs the real sqm-scripts (run-openwrt.sh,
// defaults.sh, functions.sh, reading the file through a real libuci) on
// random files and compares every variable it hands to start-sqm with our
// Queue; see that test for how to enable it.
//
// # Deliberate differences from sqm-scripts
//
//   - A malformed value is an error naming file:line, section and option
//     instead of being passed to tc (or to sh's test) and failing or being
//     ignored at start time. It refuses its section only (in a disabled
//     section it is a warning), so that a typo never half-shapes a link,
//     and never keeps the other sections unshaped either.
//   - enabled, squash_*, debug_logging accept only 0 and 1 (sh's -eq would
//     also take 01; squash_* anything but 1 meant 0).
//   - script may be given without .qos; only the recipes sqm implements are
//     accepted.
//   - itarget/etarget accept fractions (2.5ms is 2500us; sqm-scripts would
//     emit 2ms) and reject a number without a unit (sqm-scripts warned and
//     used the qdisc default).
//   - ingress_ecn/egress_ecn also accept lower-case ecn/noecn (sqm-scripts
//     passed unknown words to tc verbatim, so these worked by accident);
//     anything else is an error rather than a broken tc command line.
//   - ilimit/elimit 0 means the default, as empty does, with a warning:
//     LuCI's form accepts 0, and sqm-scripts passed "limit 0" to tc, a
//     queue that drops nearly every packet.
//   - enabled other than 0 or 1 refuses the section rather than treat it
//     as disabled: it may have been meant to start.
//   - download/upload must be plain digits up to MaxKbit (sh arithmetic
//     would read a leading 0 as octal in places).
//   - Numbers are range-checked when the file is read (see bounds.go for
//     where each bound comes from); sqm-scripts passed them to tc, which
//     failed or, for tcTSIZE, tried to build a table of that many cells.
//   - Two enabled sections on one interface: a warning naming both; as in
//     sqm-scripts the first enabled one is started and the later ones are
//     skipped (sqm-scripts skipped them silently).
//   - The file is read strictly, as `uci` reads it by default. sqm-scripts'
//     config_load runs `uci -S` (non-strict): it drops extra arguments
//     (`option download 1 2` is 1), skips lines that do not parse, and lets
//     `config sqm 'wan'` turn an earlier queue 'wan' into an sqm section.
//     We report all of these as errors.
//   - debug_logging and verbosity apply to their own section. In run.sh a
//     non-empty value of the first started section leaks into all later
//     ones (they are exported with ${VAR:-...}).
//   - The environment overrides SQM_DEBUG and SQM_VERBOSITY_MAX, and the
//     legacy ZERO_DSCP/SQUASH_DSCP variables, are not read here; they are
//     not part of the file.
package config

//go:build !linux

package cli

// The shaping and service commands drive Linux's traffic control over
// netlink; elsewhere they are stand-ins that say so (see unavailable.go).
// `sqm plan`, `sqm test` and `sqm server` build everywhere.

func cmdStart() *command   { return needsLinux("start") }
func cmdStop() *command    { return needsLinux("stop") }
func cmdRestart() *command { return needsLinux("restart") }
func cmdReload() *command  { return needsLinux("reload") }
func cmdStatus() *command  { return needsLinux("status") }
func cmdApply() *command   { return needsLinux("apply") }
func cmdDaemon() *command  { return needsLinux("daemon") }
func cmdQdiscs() *command  { return needsLinux("qdiscs") }

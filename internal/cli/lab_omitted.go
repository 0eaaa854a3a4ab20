//go:build !linux || sqm_nolab

package cli

// The lab builds namespaces and boots the VM harness: Linux only, and left
// out of router builds (-tags sqm_nolab), which drops internal/lab,
// internal/netns and internal/vm from the binary.
func cmdLab() *command { return linuxPart("lab", "sqm_nolab") }

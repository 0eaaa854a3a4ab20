package kernel

import "os/exec"

// execCommand runs a command on the calling (locked) thread's namespace:
// the child inherits the netns of the thread that forks it.
func execCommand(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}

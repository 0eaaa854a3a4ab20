package vm

import (
	"fmt"
	"io"
	"strings"
)

// cpioWriter writes the "newc" (SVR4, no CRC) cpio format, the only one the
// kernel's initramfs unpacker reads. Hand-written because the standard
// library has none and the format is a 110-byte ASCII header per entry.
type cpioWriter struct {
	w   io.Writer
	n   int64 // bytes written, for 4-byte alignment
	ino uint32
	err error
}

const (
	modeDir     = 0o040000
	modeFile    = 0o100000
	modeSymlink = 0o120000
	modeChar    = 0o020000
)

func (c *cpioWriter) write(p []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
}

func (c *cpioWriter) pad() {
	if r := c.n % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

// entry writes one archive member. name has no leading slash.
func (c *cpioWriter) entry(name string, mode uint32, data []byte, rdevMajor, rdevMinor uint32) {
	name = strings.TrimPrefix(name, "/")
	c.ino++
	nlink := uint32(1)
	if mode&0o170000 == modeDir {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rdevMajor, rdevMinor, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write([]byte(name))
	c.write([]byte{0})
	c.pad()
	c.write(data)
	c.pad()
}

func (c *cpioWriter) Dir(name string) { c.entry(name, modeDir|0o755, nil, 0, 0) }
func (c *cpioWriter) File(name string, perm uint32, data []byte) {
	c.entry(name, modeFile|perm, data, 0, 0)
}
func (c *cpioWriter) Symlink(name, target string) {
	c.entry(name, modeSymlink|0o777, []byte(target), 0, 0)
}
func (c *cpioWriter) CharDev(name string, perm, major, minor uint32) {
	c.entry(name, modeChar|perm, nil, major, minor)
}

// Close writes the trailer entry and reports the first write error.
func (c *cpioWriter) Close() error {
	c.ino = 0
	c.entry("TRAILER!!!", 0, nil, 0, 0)
	return c.err
}

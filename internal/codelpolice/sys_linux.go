//go:build linux

package codelpolice

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"sqm/internal/plan"
)

// bpf(2) commands and types (include/uapi/linux/bpf.h).
const (
	cmdMapCreate      = 0
	cmdMapLookup      = 1
	cmdMapUpdate      = 2
	cmdProgLoad       = 5
	cmdProgGetNextID  = 11
	cmdProgGetFDByID  = 13
	cmdMapGetFDByID   = 14
	cmdObjGetInfoByFD = 15

	progTypeSchedCls = 3
	objNameLen       = 16
	progInfoLen      = 80
	mapInfoLen       = 40
)

// attr is a bpf_attr under construction: fields at their offsets in the
// kernel's layout, pointers kept pinned until the call returns.
type attr struct {
	b   [128]byte
	pin runtime.Pinner
}

func (a *attr) u32(off int, v uint32) { binary.NativeEndian.PutUint32(a.b[off:], v) }

// ptr stores a pointer to the first byte of b; the Pinner keeps b where
// it is (and alive) until done.
func (a *attr) ptr(off int, b []byte) {
	if len(b) == 0 {
		return
	}
	a.pin.Pin(&b[0])
	binary.NativeEndian.PutUint64(a.b[off:], uint64(uintptr(unsafe.Pointer(&b[0]))))
}

func (a *attr) name(off int, s string) { copy(a.b[off:off+objNameLen-1], s) }

// call runs bpf(cmd) with the first size bytes of the attribute.
func (a *attr) call(cmd int, size int) (int, error) {
	defer a.pin.Unpin()
	for {
		r, _, e := unix.Syscall(unix.SYS_BPF, uintptr(cmd), uintptr(unsafe.Pointer(&a.b[0])), uintptr(size))
		if e == unix.EINTR || e == unix.EAGAIN && cmd == cmdProgLoad {
			continue
		}
		if e != 0 {
			return -1, e
		}
		return int(r), nil
	}
}

func permHint(err error) error {
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%w (loading eBPF programs needs root or CAP_BPF and CAP_NET_ADMIN)", err)
	}
	return err
}

func mapCreate(m mapSpec) (int, error) {
	var a attr
	a.u32(0, m.typ)
	a.u32(4, m.keySize)
	a.u32(8, m.valueSize)
	a.u32(12, m.maxEntries)
	a.u32(16, m.flags)
	a.name(28, "sqm_cp_"+m.name)
	fd, err := a.call(cmdMapCreate, 48)
	if err != nil {
		return -1, permHint(fmt.Errorf("create map %s: %w", m.name, err))
	}
	return fd, nil
}

func mapUpdate(fd int, key, value []byte) error {
	var a attr
	a.u32(0, uint32(fd))
	a.ptr(8, key)
	a.ptr(16, value)
	_, err := a.call(cmdMapUpdate, 32)
	return err
}

func mapLookup(fd int, key, value []byte) error {
	var a attr
	a.u32(0, uint32(fd))
	a.ptr(8, key)
	a.ptr(16, value)
	_, err := a.call(cmdMapLookup, 32)
	return err
}

// progLoad loads the instructions; when the verifier refuses them it loads
// again with the log on and returns the log's end, which says why.
func progLoad(insns []byte, license string) (int, error) {
	lic := append([]byte(license), 0)
	load := func(log []byte) (int, error) {
		var a attr
		a.u32(0, progTypeSchedCls)
		a.u32(4, uint32(len(insns)/insnSize))
		a.ptr(8, insns)
		a.ptr(16, lic)
		if log != nil {
			a.u32(24, 1)
			a.u32(28, uint32(len(log)))
			a.ptr(32, log)
		}
		a.name(48, ProgName)
		return a.call(cmdProgLoad, 72)
	}
	fd, err := load(nil)
	if err == nil {
		return fd, nil
	}
	if !errors.Is(err, unix.EACCES) && !errors.Is(err, unix.EINVAL) {
		return -1, permHint(fmt.Errorf("load program: %w", err))
	}
	log := make([]byte, 1<<20)
	if _, err2 := load(log); err2 == nil {
		return -1, fmt.Errorf("load program: %w (refused once, accepted with the log on)", err)
	}
	text := strings.TrimRight(string(log[:clen(log)]), "\n")
	if lines := strings.Split(text, "\n"); len(lines) > 12 {
		text = strings.Join(lines[len(lines)-12:], "\n")
	}
	return -1, fmt.Errorf("load program: the kernel's verifier refused it: %w\n%s", err, text)
}

func clen(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return len(b)
}

// Program is a loaded codel_police program. The tc filter takes its own
// reference: Close once the filter is attached (or on failure).
type Program struct {
	fd int
}

// FD is the program's file descriptor, for TCA_BPF_FD.
func (p *Program) FD() int { return p.fd }

// Close drops this reference to the program.
func (p *Program) Close() error {
	if p == nil || p.fd < 0 {
		return nil
	}
	err := unix.Close(p.fd)
	p.fd = -1
	return err
}

// Load creates the program's maps, writes its parameters and loads it.
// l2len is the device's link-layer header length (14 or 0).
func Load(p *plan.CodelPolice, l2len int) (*Program, error) {
	cfg, err := configBytes(p, l2len)
	if err != nil {
		return nil, err
	}
	o := nativeObject()
	ci := o.mapIndex("config")
	if ci < 0 || o.maps[ci].valueSize != configSize {
		return nil, errors.New("codel_police object: no config map of the expected size")
	}
	fds := make([]int, len(o.maps))
	// The program holds its maps; these descriptors go when it is loaded.
	defer func() {
		for _, fd := range fds {
			if fd > 0 {
				unix.Close(fd)
			}
		}
	}()
	for i, m := range o.maps {
		if fds[i], err = mapCreate(m); err != nil {
			return nil, fmt.Errorf("codel_police: %w", err)
		}
	}
	if err := mapUpdate(fds[ci], make([]byte, 4), cfg); err != nil {
		return nil, fmt.Errorf("codel_police: write parameters: %w", err)
	}
	fd, err := progLoad(o.patched(fds), o.license)
	if err != nil {
		return nil, fmt.Errorf("codel_police: %w", err)
	}
	return &Program{fd: fd}, nil
}

// progInfo is the part of struct bpf_prog_info sqm reads.
type progInfo struct {
	name   string
	mapIDs []uint32
}

func objInfo(fd int, info []byte) error {
	var a attr
	a.u32(0, uint32(fd))
	a.u32(4, uint32(len(info)))
	a.ptr(8, info)
	_, err := a.call(cmdObjGetInfoByFD, 16)
	return err
}

func getProgInfo(fd int) (progInfo, error) {
	info := make([]byte, progInfoLen)
	if err := objInfo(fd, info); err != nil {
		return progInfo{}, err
	}
	n := binary.NativeEndian.Uint32(info[52:])
	pi := progInfo{name: cstr(info[64 : 64+objNameLen])}
	if n == 0 || n > maxMaps {
		return pi, nil
	}
	ids := make([]byte, 4*n)
	info = make([]byte, progInfoLen)
	binary.NativeEndian.PutUint32(info[52:], n)
	var a attr
	a.u32(0, uint32(fd))
	a.u32(4, progInfoLen)
	a.ptr(8, info)
	// map_ids must point at our array before the call.
	a.pin.Pin(&ids[0])
	binary.NativeEndian.PutUint64(info[56:], uint64(uintptr(unsafe.Pointer(&ids[0]))))
	if _, err := a.call(cmdObjGetInfoByFD, 16); err != nil {
		return pi, err
	}
	got := min(binary.NativeEndian.Uint32(info[52:]), n)
	for i := uint32(0); i < got; i++ {
		pi.mapIDs = append(pi.mapIDs, binary.NativeEndian.Uint32(ids[4*i:]))
	}
	return pi, nil
}

func cstr(b []byte) string { return string(b[:clen(b)]) }

func fdByID(cmd int, id uint32) (int, error) {
	var a attr
	a.u32(0, id)
	return a.call(cmd, 12)
}

// ReadCounters reads the counters of the loaded program with this id (the
// id the tc filter dump reports in TCA_BPF_ID).
func ReadCounters(progID uint32) (Counters, error) {
	pfd, err := fdByID(cmdProgGetFDByID, progID)
	if err != nil {
		return Counters{}, permHint(fmt.Errorf("codel_police: program %d: %w", progID, err))
	}
	defer unix.Close(pfd)
	pi, err := getProgInfo(pfd)
	if err != nil {
		return Counters{}, fmt.Errorf("codel_police: program %d info: %w", progID, err)
	}
	if pi.name != ProgName {
		return Counters{}, fmt.Errorf("codel_police: program %d is %q, not %s", progID, pi.name, ProgName)
	}
	for _, id := range pi.mapIDs {
		mfd, err := fdByID(cmdMapGetFDByID, id)
		if err != nil {
			continue
		}
		info := make([]byte, mapInfoLen)
		if err := objInfo(mfd, info); err != nil || cstr(info[24:24+objNameLen]) != "sqm_cp_counters" {
			unix.Close(mfd)
			continue
		}
		// The slots the program has: a program loaded by another sqm
		// version may have fewer (slots are only ever appended) or more.
		slots := int(binary.NativeEndian.Uint32(info[12:])) / 8
		c, err := readPerCPU(mfd, slots)
		unix.Close(mfd)
		return c, err
	}
	return Counters{}, fmt.Errorf("codel_police: program %d has no counters map", progID)
}

func readPerCPU(fd, slots int) (Counters, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return Counters{}, fmt.Errorf("codel_police counters: %w", err)
	}
	ncpu, err := parseCPUList(string(b))
	if err != nil {
		return Counters{}, fmt.Errorf("codel_police counters: %w", err)
	}
	val := make([]byte, slots*8*ncpu)
	if err := mapLookup(fd, make([]byte, 4), val); err != nil {
		return Counters{}, fmt.Errorf("codel_police counters: %w", err)
	}
	return sumPerCPU(val, ncpu, slots)
}

// LoadedPrograms lists the ids of every loaded program named
// codel_police, so tests can check that removal left none behind.
func LoadedPrograms() ([]uint32, error) {
	var ids []uint32
	var id uint32
	for {
		var a attr
		a.u32(0, id)
		if _, err := a.call(cmdProgGetNextID, 12); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return ids, nil
			}
			return ids, permHint(err)
		}
		id = binary.NativeEndian.Uint32(a.b[4:])
		fd, err := fdByID(cmdProgGetFDByID, id)
		if err != nil {
			continue // unloaded meanwhile
		}
		pi, err := getProgInfo(fd)
		unix.Close(fd)
		if err == nil && pi.name == ProgName {
			ids = append(ids, id)
		}
	}
}

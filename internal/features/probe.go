// Package features is the one table of the kernel objects sqm uses (qdisc,
// classifier, action and link kinds) with the Linux module and OpenWrt
// package that provide each, and a prober that answers "does this kernel
// have X?" by creating X for real.
//
// Shaping itself does not probe: kernel.Apply creates the tree inside its
// transaction and, when the kernel refuses a kind it does not know, rolls
// back and reports the module and package through Refused. That needs
// nothing but CAP_NET_ADMIN and the interface being shaped. The prober is
// for callers that want an answer without shaping anything (the lab,
// tests, a web UI listing the available qdiscs): it works in a throwaway
// network namespace, on that namespace's own loopback device, so it needs
// no veth (kmod-veth is not in default OpenWrt images) but does need
// CAP_SYS_ADMIN for unshare(CLONE_NEWNET).
//
// A kernel built without network namespaces (OpenWrt's small-flash
// targets turn KERNEL_NAMESPACES off) answers that unshare with EINVAL.
// The prober then works, as sqm-scripts' qdisc probe does, on a temporary
// IFB device of its own in the current namespace, uniquely named and
// deleted afterwards; it never touches another interface, and an action it
// creates to probe (actions are per namespace, not per device) gets an
// index of its own and is deleted again.
//
// Answers are cached per Prober, but only conclusive ones (present, or
// missing with ENOENT/EOPNOTSUPP): a permission error or an odd failure is
// returned and probed again next time.
package features

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"sqm/internal/netlink"
	"sqm/internal/nlattr"
	"sqm/internal/rtlink"
)

// Prober probes and caches. The zero value is not usable; use NewProber.
// It is safe for concurrent use; probes run one at a time.
type Prober struct {
	mu    sync.Mutex
	known map[Feature]error // conclusive answers: nil or *MissingError
}

// NewProber returns a Prober with an empty cache.
func NewProber() *Prober { return &Prober{known: map[Feature]error{}} }

// defaultProber backs the package-level functions. The kernel's feature
// set is a fact about the whole process (modules only get added), so one
// shared cache avoids re-probing from every caller; it holds no other state.
// Tests that must not share answers use NewProber.
var defaultProber = NewProber()

// Qdisc reports whether qdisc kind is available; see Prober.Qdisc.
func Qdisc(kind string) error { return defaultProber.Qdisc(kind) }

// Classifier reports whether classifier kind is available.
func Classifier(kind string) error { return defaultProber.Classifier(kind) }

// Action reports whether action kind is available.
func Action(kind string) error { return defaultProber.Action(kind) }

// IFB reports whether IFB devices can be created.
func IFB() error { return defaultProber.IFB() }

// Qdisc returns nil if a qdisc of this kind can be created, a
// *MissingError (errors.Is ErrNotAvailable) if the kernel lacks it, or
// another error if the probe itself failed.
func (p *Prober) Qdisc(kind string) error { return p.check(TypeQdisc, kind) }

// Classifier is Qdisc for filter kinds (u32, matchall, flower, fw).
func (p *Prober) Classifier(kind string) error { return p.check(TypeClassifier, kind) }

// Action is Qdisc for action kinds (mirred, police, gact, skbedit, ctinfo).
func (p *Prober) Action(kind string) error { return p.check(TypeAction, kind) }

// IFB is Qdisc for the ifb link type.
func (p *Prober) IFB() error { return p.check(TypeLink, "ifb") }

// Check probes a list of features and joins the errors of those missing.
func (p *Prober) Check(fs ...Feature) error {
	var errs []error
	for _, f := range fs {
		if err := p.check(f.Type, f.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (p *Prober) check(t Type, name string) error {
	f, ok := Lookup(t, name)
	if !ok {
		return unknownKind(t, name)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err, ok := p.known[f]; ok {
		return err
	}
	err := probe(f)
	if err == nil || errors.Is(err, ErrNotAvailable) {
		p.known[f] = err
	}
	return err
}

// Qdiscs is Qdisc for each of kinds, in one throwaway namespace (or on
// one temporary IFB) rather than one each: making and tearing down a
// namespace is most of a probe's cost, and the daemon probes every qdisc
// luci-app-sqm may offer at each start (750 ms of the lab VM's start-up,
// one namespace per kind). Each qdisc added is deleted before the next;
// where that fails, the next kind gets a fresh namespace.
func (p *Prober) Qdiscs(kinds []string) []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := make([]error, len(kinds))
	var ns *throwawayNS
	var in []int // the kinds probed in ns
	done := func() {
		if cerr := ns.Close(); cerr != nil {
			for _, i := range in {
				if errs[i] == nil || errors.Is(errs[i], ErrNotAvailable) {
					f, _ := Lookup(TypeQdisc, kinds[i])
					delete(p.known, f)
					errs[i] = fmt.Errorf("features: probe %s: %w", f, cerr)
				}
			}
		}
		ns, in = nil, in[:0]
	}
	for i, k := range kinds {
		f, ok := Lookup(TypeQdisc, k)
		if !ok {
			errs[i] = unknownKind(TypeQdisc, k)
			continue
		}
		if err, ok := p.known[f]; ok {
			errs[i] = err
			continue
		}
		if ns == nil {
			var err error
			if ns, err = openProbeSpace(f); err != nil {
				errs[i] = err
				continue
			}
		}
		err := ns.probe(f)
		in = append(in, i)
		if err == nil || errors.Is(err, ErrNotAvailable) {
			p.known[f] = err
		}
		errs[i] = err
		if err == nil && ns.deleteQdisc(f) != nil {
			done() // left on the device, it would make the next add fail
		}
	}
	if ns != nil {
		done()
	}
	return errs
}

func unknownKind(t Type, name string) error {
	return fmt.Errorf("features: unknown %s kind %q: the prober knows %s", t, name, strings.Join(namesOf(t), ", "))
}

// probe runs one probe in a fresh network namespace, or on a temporary
// IFB where the kernel has no network namespaces.
func probe(f Feature) (err error) {
	ns, err := openProbeSpace(f)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := ns.Close(); cerr != nil && (err == nil || errors.Is(err, ErrNotAvailable)) {
			err = fmt.Errorf("features: probe %s: %w", f, cerr)
		}
	}()
	return ns.probe(f)
}

// openProbeSpace makes the space f is probed in: a fresh network
// namespace, or a temporary IFB where the kernel has none. Its error is
// f's probe's.
func openProbeSpace(f Feature) (*throwawayNS, error) {
	ns, err := newThrowawayNS()
	if errors.Is(err, unix.EINVAL) {
		ns, err = newHostIFB()
		if err != nil {
			if f.Type == TypeLink && f.Name == "ifb" {
				return nil, classify(f, "add link", err)
			}
			return nil, fmt.Errorf("features: probe %s: the kernel has no network namespaces, and the probe device could not be made: %w", f, err)
		}
	}
	if err != nil {
		return nil, classify(f, "create network namespace", err)
	}
	return ns, nil
}

// unshareNet makes the calling thread's network namespace a new one. A
// variable so that a test can answer EINVAL, as a kernel without
// CONFIG_NET_NS does.
var unshareNet = func() error { return unix.Unshare(unix.CLONE_NEWNET) }

// hostNetNS is the namespace the IFB probe works in: the process's own. A
// variable so that a test can point it at a namespace it made rather than
// the host's.
var hostNetNS = "/proc/self/ns/net"

// newHostIFB is the probe space of a kernel without network namespaces: a
// new IFB device in hostNetNS with a name no one else uses (sqmp and 8
// random hex digits; EEXIST if it is taken after all), deleted by Close.
func newHostIFB() (*throwawayNS, error) {
	fd, err := unix.Open(hostNetNS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", hostNetNS, err)
	}
	ns := &throwawayNS{fd: fd, host: true}
	if ns.nl, err = netlink.Dial(netlink.Config{NetNS: fd}); err != nil {
		ns.Close()
		return nil, fmt.Errorf("tc netlink: %w", err)
	}
	// Unique, not secret: math/rand/v2 (crypto/rand would link
	// math/big into the router build); a name taken after all fails
	// with EEXIST.
	name := fmt.Sprintf("sqmp%08x", rand.Uint32())
	if err := rtlink.New(ns.nl, name, "ifb", 0); err != nil {
		ns.Close()
		return nil, fmt.Errorf("create temporary ifb %s: %w", name, err)
	}
	l, err := rtlink.ByName(ns.nl, name)
	if err == nil && l.Kind != "ifb" {
		err = fmt.Errorf("is a %q link, not the ifb just made", l.Kind)
	}
	if err != nil {
		// Without its index the device cannot be deleted by index;
		// delete it by name.
		ns.deleteByName(name)
		ns.Close()
		return nil, fmt.Errorf("temporary ifb %s: %w", name, err)
	}
	ns.dev, ns.ifb = uint32(l.Index), name
	return ns, nil
}

// deleteByName deletes link name with RTM_DELLINK carrying IFLA_IFNAME.
func (ns *throwawayNS) deleteByName(name string) error {
	_, err := ns.nl.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.RTM_DELLINK, Flags: netlink.Request | netlink.Acknowledge},
		Data:   append(make([]byte, 16), nlattr.Str(unix.IFLA_IFNAME, name)...), // struct ifinfomsg, all zero
	})
	return err
}

// classify turns a kernel error into the package's error kinds.
func classify(f Feature, op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return &permissionError{Feature: f, Err: err}
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EOPNOTSUPP):
		return &MissingError{Feature: f, Err: err}
	}
	return fmt.Errorf("features: probe %s: %s: %w", f, op, err)
}

// throwawayNS is an unnamed network namespace that lives as long as its
// file descriptor. Probes use its loopback device, which every namespace
// has: a veth pair would make the probe depend on kmod-veth, and a missing
// veth module used to be misreported as the probed module missing.
type throwawayNS struct {
	fd  int
	nl  *netlink.Conn // traffic control requests, encoded here
	dev uint32        // ifindex of the namespace's lo, or of the temporary ifb
	// host is set when the probes run in an existing namespace (see
	// newHostIFB): what they create must then be deleted again.
	host bool
	ifb  string // the temporary ifb's name, deleted by Close
}

// newThrowawayNS makes the namespace on a locked OS thread that is
// discarded afterwards (the goroutine exits still locked, so the runtime
// kills the thread instead of reusing it in the wrong namespace).
func newThrowawayNS() (*throwawayNS, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := unshareNet(); err != nil {
			ch <- result{-1, fmt.Errorf("unshare: %w", err)}
			return
		}
		fd, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			err = fmt.Errorf("open netns: %w", err)
		}
		ch <- result{fd, err}
	}()
	r := <-ch
	if r.err != nil {
		return nil, r.err
	}
	ns := &throwawayNS{fd: r.fd}
	var err error
	// Dial turns extended acks on, which put the kernel's reason into
	// errors ("Specified qdisc kind is unknown"); older kernels without
	// them still work.
	if ns.nl, err = netlink.Dial(netlink.Config{NetNS: r.fd}); err != nil {
		ns.Close()
		return nil, fmt.Errorf("tc netlink: %w", err)
	}
	lo, err := rtlink.ByName(ns.nl, "lo")
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("new network namespace: look up lo: %w", err)
	}
	ns.dev = uint32(lo.Index)
	return ns, nil
}

// Close releases the namespace, or deletes the temporary ifb (and with it
// every qdisc and filter a probe put on it); an error says it is left
// behind.
func (ns *throwawayNS) Close() error {
	var err error
	if ns.ifb != "" && ns.nl != nil {
		if derr := rtlink.Delete(ns.nl, int(ns.dev)); derr != nil {
			err = fmt.Errorf("delete temporary ifb %s: %w", ns.ifb, derr)
		}
	}
	if ns.nl != nil {
		ns.nl.Close()
	}
	if ns.fd >= 0 {
		unix.Close(ns.fd)
	}
	return err
}

// tcMsg is struct tcmsg's fields.
type tcMsg struct {
	ifindex, handle, parent, info uint32
}

// u32s is v in native byte order, back to back (a C struct of __u32s).
func u32s(v ...uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.NativeEndian.PutUint32(b[4*i:], x)
	}
	return b
}

// send sends one RTM_NEW* request: struct tcmsg, then the attributes.
func (ns *throwawayNS) send(typ uint16, m tcMsg, attrs ...[]byte) error {
	data := make([]byte, 20) // struct tcmsg, family AF_UNSPEC
	binary.NativeEndian.PutUint32(data[4:], m.ifindex)
	binary.NativeEndian.PutUint32(data[8:], m.handle)
	binary.NativeEndian.PutUint32(data[12:], m.parent)
	binary.NativeEndian.PutUint32(data[16:], m.info)
	for _, a := range attrs {
		data = append(data, a...)
	}
	_, err := ns.nl.Execute(netlink.Message{
		Header: netlink.Header{
			Type:  typ,
			Flags: netlink.Request | netlink.Acknowledge | netlink.Create | netlink.Excl,
		},
		Data: data,
	})
	return err
}

// deleteQdisc deletes the qdisc a TypeQdisc probe of f added.
func (ns *throwawayNS) deleteQdisc(f Feature) error {
	parent := uint32(handleRoot)
	if f.Name == "ingress" || f.Name == "clsact" {
		parent = handleIngress
	}
	_, err := ns.nl.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.RTM_DELQDISC, Flags: netlink.Request | netlink.Acknowledge},
		Data:   u32s(0, ns.dev, 0, parent, 0), // struct tcmsg: family AF_UNSPEC and padding, ifindex, handle, parent, info
	})
	return err
}

// action sends an RTM_*ACTION request: struct tcamsg (family, 3 bytes of
// padding), then TCA_ACT_TAB holding the one action given.
func (ns *throwawayNS) action(typ, flags uint16, act []byte) error {
	_, err := ns.nl.Execute(netlink.Message{
		Header: netlink.Header{Type: typ, Flags: netlink.Request | netlink.Acknowledge | flags},
		Data:   append(make([]byte, 4), nlattr.Nest(1, act)...),
	})
	return err
}

func handle(major, minor uint32) uint32 { return major<<16 | minor }

const (
	handleRoot    = 0xFFFFFFFF
	handleIngress = 0xFFFFFFF1 // also clsact's parent
	ethPAll       = 0x0300     // htons(ETH_P_ALL)
	actOK         = 0          // TC_ACT_OK
	actShot       = 2          // TC_ACT_SHOT
	actPipe       = 3          // TC_ACT_PIPE
	actStolen     = 4          // TC_ACT_STOLEN
	egressRedir   = 1          // TCA_EGRESS_REDIR
	tcaKind       = 1
	tcaOptions    = 2
)

// qdiscOptions returns a minimal valid TCA_OPTIONS payload for each qdisc
// kind (nil: none, the kernel's defaults), and false for a kind without
// a probe. htb, tbf and netem need some options; the others get one to
// show the kernel takes the kind's options too.
func qdiscOptions(kind string) ([]byte, bool) {
	switch kind {
	case "htb":
		return nlattr.Attr(2, u32s(3, 10, 0, 0, 0)), true // TCA_HTB_INIT: version 3, r2q 10
	case "tbf":
		// TCA_TBF_PARMS: rate 1 Mbit/s (ethernet), no peak rate, limit,
		// buffer, mtu; TCA_TBF_BURST makes the kernel compute the buffer.
		qopt := make([]byte, 36)
		qopt[1] = 1 // linklayer ethernet
		binary.NativeEndian.PutUint32(qopt[8:], 125000)
		binary.NativeEndian.PutUint32(qopt[24:], 10000)
		binary.NativeEndian.PutUint32(qopt[32:], 1514)
		return append(nlattr.Attr(1, qopt), nlattr.U32(6, 1600)...), true
	case "cake":
		return nlattr.Attr(2, make([]byte, 8)), true // TCA_CAKE_BASE_RATE64 0: unlimited
	case "fq_codel", "codel", "pie":
		return nlattr.U32(2, 1000), true // TCA_*_LIMIT
	case "fq_pie":
		return nlattr.U32(1, 1000), true // TCA_FQ_PIE_LIMIT
	case "sfq":
		return u32s(0, 0, 127, 0, 0), true // struct tc_sfq_qopt, limit 127
	case "pfifo":
		return u32s(1000), true // struct tc_fifo_qopt
	case "bfifo":
		return u32s(100000), true
	case "netem":
		return u32s(0, 1000, 0, 0, 0, 0), true // struct tc_netem_qopt, limit 1000
	case "ingress", "clsact":
		return nil, true
	}
	return nil, false
}

// structOptions are the kinds whose TCA_OPTIONS is a C struct, not
// nested attributes (sent without NLA_F_NESTED).
var structOptions = map[string]bool{"sfq": true, "pfifo": true, "bfifo": true, "netem": true}

func (ns *throwawayNS) probe(f Feature) error {
	switch f.Type {
	case TypeQdisc:
		opts, ok := qdiscOptions(f.Name)
		if !ok {
			return fmt.Errorf("features: no probe for qdisc %s", f.Name)
		}
		msg := tcMsg{ifindex: ns.dev, handle: handle(1, 0), parent: handleRoot}
		if f.Name == "ingress" || f.Name == "clsact" {
			msg.handle, msg.parent = handle(0xFFFF, 0), handleIngress
		}
		attrs := [][]byte{nlattr.Str(tcaKind, f.Name)}
		switch {
		case opts == nil:
		case structOptions[f.Name]:
			attrs = append(attrs, nlattr.Attr(tcaOptions, opts))
		default:
			attrs = append(attrs, nlattr.Nest(tcaOptions, opts))
		}
		return classify(f, "add qdisc", ns.send(unix.RTM_NEWQDISC, msg, attrs...))

	case TypeClassifier:
		if err := ns.send(unix.RTM_NEWQDISC, tcMsg{ifindex: ns.dev, handle: handle(0xFFFF, 0), parent: handleIngress},
			nlattr.Str(tcaKind, "ingress")); err != nil {
			return fmt.Errorf("features: probe %s: needs an ingress qdisc to attach to, which failed: %w", f, err)
		}
		msg := tcMsg{ifindex: ns.dev, parent: handle(0xFFFF, 0), info: 1<<16 | ethPAll}
		classID := handle(1, 1)
		var opts []byte
		switch f.Name {
		case "u32":
			// TCA_U32_CLASSID, TCA_U32_SEL: terminal, one key matching all.
			sel := make([]byte, 32)
			sel[0], sel[2] = 1, 1
			opts = append(nlattr.U32(1, classID), nlattr.Attr(5, sel)...)
		case "matchall":
			opts = nlattr.U32(1, classID) // TCA_MATCHALL_CLASSID
		case "flower":
			opts = nlattr.U32(1, classID) // TCA_FLOWER_CLASSID
		case "fw":
			msg.handle = 1                // the fwmark to match
			opts = nlattr.U32(1, classID) // TCA_FW_CLASSID
		case "bpf":
			// A one-instruction classic BPF program ("ret #-1": match),
			// which cls_bpf takes without the bpf(2) syscall, so the probe
			// needs nothing beyond what the other classifiers need.
			ops := []byte{0x06, 0, 0, 0, 0xff, 0xff, 0xff, 0xff} // sock_filter{BPF_RET|BPF_K, 0, 0, 0xffffffff}
			n := make([]byte, 2)
			binary.NativeEndian.PutUint16(n, 1)
			// TCA_BPF_CLASSID, TCA_BPF_OPS_LEN, TCA_BPF_OPS.
			opts = append(append(nlattr.U32(3, classID), nlattr.Attr(4, n)...), nlattr.Attr(5, ops)...)
		default:
			return fmt.Errorf("features: no probe for classifier %s", f.Name)
		}
		return classify(f, "add filter", ns.send(unix.RTM_NEWTFILTER, msg, nlattr.Str(tcaKind, f.Name), nlattr.Nest(tcaOptions, opts)))

	case TypeAction:
		index := uint32(1)
		if ns.host {
			// Actions live in the namespace, not on the device: take
			// an index real ones are unlikely to have (an existing one
			// makes the add fail with EEXIST rather than touch it).
			index = 0x40000000 | rand.Uint32()&0x3fffffff
		}
		var opts []byte
		switch f.Name {
		case "gact":
			// TCA_GACT_PARMS: struct tc_gact (index, capab, action, refcnt, bindcnt).
			opts = nlattr.Attr(2, u32s(index, 0, actOK, 0, 0))
		case "mirred":
			// TCA_MIRRED_PARMS: struct tc_mirred (tc_gen, eaction, ifindex).
			opts = nlattr.Attr(2, u32s(index, 0, actStolen, 0, 0, egressRedir, ns.dev))
		case "police":
			// TCA_POLICE_TBF: struct tc_police without a rate (a rate needs
			// a 1024-byte rate table); burst and mtu are enough to show
			// that act_police exists.
			p := make([]byte, 56)
			copy(p, u32s(index, actShot, 0, 10000, 2048))
			opts = nlattr.Attr(1, p)
		case "skbedit":
			// TCA_SKBEDIT_PARMS (struct tc_skbedit = tc_gen), TCA_SKBEDIT_PRIORITY.
			opts = append(nlattr.Attr(2, u32s(index, 0, actPipe, 0, 0)), nlattr.U32(3, 1)...)
		case "ctinfo":
			// TCA_CTINFO_ACT (struct tc_ctinfo = tc_gen), DSCP mask and state mask.
			opts = append(append(nlattr.Attr(3, u32s(index, 0, actPipe, 0, 0)), nlattr.U32(5, 0xfc000000)...), nlattr.U32(6, 0x01000000)...)
		default:
			return fmt.Errorf("features: no probe for action %s", f.Name)
		}
		// RTM_NEWACTION: struct tcamsg (family, 3 bytes of padding), then
		// TCA_ACT_TAB holding action 1: TCA_ACT_KIND, TCA_ACT_OPTIONS.
		act := nlattr.Nest(1, append(nlattr.Str(1, f.Name), nlattr.Nest(2, opts)...))
		err := ns.action(unix.RTM_NEWACTION, netlink.Create|netlink.Excl, act)
		if err == nil && ns.host {
			// TCA_ACT_TAB, action 1: TCA_ACT_KIND, TCA_ACT_INDEX.
			del := nlattr.Nest(1, append(nlattr.Str(1, f.Name), nlattr.U32(3, index)...))
			if derr := ns.action(unix.RTM_DELACTION, 0, del); derr != nil {
				return fmt.Errorf("features: probe %s: delete the probe's action %s index %d: %w", f, f.Name, index, derr)
			}
		}
		return classify(f, "add action", err)

	case TypeLink:
		if ns.host && f.Name == "ifb" {
			return nil // the probe device is one
		}
		return classify(f, "add link", rtlink.New(ns.nl, "probe0", f.Name, 0))
	}
	return fmt.Errorf("features: no probe for %s", f)
}

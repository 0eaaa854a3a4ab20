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
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/florianl/go-tc"
	"github.com/florianl/go-tc/core"
	"github.com/jsimonetti/rtnetlink/v2"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
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
		return fmt.Errorf("features: unknown %s kind %q: the prober knows %s", t, name, strings.Join(namesOf(t), ", "))
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

// probe runs one probe in a fresh network namespace, or on a temporary
// IFB where the kernel has no network namespaces.
func probe(f Feature) (err error) {
	ns, err := newThrowawayNS()
	if errors.Is(err, unix.EINVAL) {
		ns, err = newHostIFB()
		if err != nil {
			if f.Type == TypeLink && f.Name == "ifb" {
				return classify(f, "add link", err)
			}
			return fmt.Errorf("features: probe %s: the kernel has no network namespaces, and the probe device could not be made: %w", f, err)
		}
	}
	if err != nil {
		return classify(f, "create network namespace", err)
	}
	defer func() {
		if cerr := ns.Close(); cerr != nil && (err == nil || errors.Is(err, ErrNotAvailable)) {
			err = fmt.Errorf("features: probe %s: %w", f, cerr)
		}
	}()
	return ns.probe(f)
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
	if ns.rtnl, err = rtnetlink.Dial(&netlink.Config{NetNS: fd}); err != nil {
		ns.Close()
		return nil, fmt.Errorf("rtnetlink: %w", err)
	}
	if ns.tc, err = tc.Open(&tc.Config{NetNS: fd}); err != nil {
		ns.Close()
		return nil, fmt.Errorf("tc netlink: %w", err)
	}
	_ = ns.tc.SetOption(netlink.ExtendedAcknowledge, true)
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		ns.Close()
		return nil, err
	}
	name := fmt.Sprintf("sqmp%08x", binary.BigEndian.Uint32(rnd[:]))
	if err := ns.rtnl.Link.New(&rtnetlink.LinkMessage{
		Family:     unix.AF_UNSPEC,
		Attributes: &rtnetlink.LinkAttributes{Name: name, Info: &rtnetlink.LinkInfo{Kind: "ifb"}},
	}); err != nil {
		ns.Close()
		return nil, fmt.Errorf("create temporary ifb %s: %w", name, err)
	}
	links, err := ns.rtnl.Link.List()
	if err == nil {
		for _, l := range links {
			if l.Attributes != nil && l.Attributes.Name == name && l.Attributes.Info != nil && l.Attributes.Info.Kind == "ifb" {
				ns.dev = l.Index
			}
		}
		if ns.dev == 0 {
			err = errors.New("not listed after creating it")
		}
	}
	if err != nil {
		// Without its index the device cannot be deleted by index;
		// delete it by name.
		ns.deleteByName(name)
		ns.Close()
		return nil, fmt.Errorf("temporary ifb %s: %w", name, err)
	}
	ns.ifb = name
	return ns, nil
}

// deleteByName deletes link name with RTM_DELLINK carrying IFLA_IFNAME.
func (ns *throwawayNS) deleteByName(name string) error {
	ae := netlink.NewAttributeEncoder()
	ae.String(unix.IFLA_IFNAME, name)
	attrs, err := ae.Encode()
	if err != nil {
		return err
	}
	c, err := netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{NetNS: ns.fd})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.RTM_DELLINK, Flags: netlink.Request | netlink.Acknowledge},
		Data:   append(make([]byte, 16), attrs...), // struct ifinfomsg, all zero
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
	fd   int
	rtnl *rtnetlink.Conn
	tc   *tc.Tc
	dev  uint32 // ifindex of the namespace's lo, or of the temporary ifb
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
	if ns.rtnl, err = rtnetlink.Dial(&netlink.Config{NetNS: r.fd}); err != nil {
		ns.Close()
		return nil, fmt.Errorf("rtnetlink: %w", err)
	}
	if ns.tc, err = tc.Open(&tc.Config{NetNS: r.fd}); err != nil {
		ns.Close()
		return nil, fmt.Errorf("tc netlink: %w", err)
	}
	// Extended acks put the kernel's reason into errors ("Specified qdisc
	// kind is unknown"); older kernels without them still work.
	_ = ns.tc.SetOption(netlink.ExtendedAcknowledge, true)
	links, err := ns.rtnl.Link.List()
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("list links: %w", err)
	}
	for _, l := range links {
		if l.Attributes != nil && l.Attributes.Name == "lo" {
			ns.dev = l.Index
		}
	}
	if ns.dev == 0 {
		ns.Close()
		return nil, errors.New("new network namespace has no lo device")
	}
	return ns, nil
}

// Close releases the namespace, or deletes the temporary ifb (and with it
// every qdisc and filter a probe put on it); an error says it is left
// behind.
func (ns *throwawayNS) Close() error {
	var err error
	if ns.ifb != "" && ns.rtnl != nil {
		if derr := ns.rtnl.Link.Delete(ns.dev); derr != nil {
			err = fmt.Errorf("delete temporary ifb %s: %w", ns.ifb, derr)
		}
	}
	if ns.tc != nil {
		ns.tc.Close()
	}
	if ns.rtnl != nil {
		ns.rtnl.Close()
	}
	if ns.fd >= 0 {
		unix.Close(ns.fd)
	}
	return err
}

// addQdiscKindOnly sends RTM_NEWQDISC with TCA_KIND and no options, by
// hand: the kernel then uses the qdisc's defaults.
func (ns *throwawayNS) addQdiscKindOnly(m tc.Msg, kind string) error {
	c, err := netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{NetNS: ns.fd})
	if err != nil {
		return fmt.Errorf("dial rtnetlink: %w", err)
	}
	defer c.Close()
	_ = c.SetOption(netlink.ExtendedAcknowledge, true)
	hdr := make([]byte, 20) // struct tcmsg
	hdr[0] = byte(m.Family)
	binary.NativeEndian.PutUint32(hdr[4:], m.Ifindex)
	binary.NativeEndian.PutUint32(hdr[8:], m.Handle)
	binary.NativeEndian.PutUint32(hdr[12:], m.Parent)
	binary.NativeEndian.PutUint32(hdr[16:], m.Info)
	ae := netlink.NewAttributeEncoder()
	ae.String(1 /* TCA_KIND */, kind)
	attrs, err := ae.Encode()
	if err != nil {
		return err
	}
	_, err = c.Execute(netlink.Message{
		Header: netlink.Header{
			Type:  unix.RTM_NEWQDISC,
			Flags: netlink.Request | netlink.Acknowledge | netlink.Create | netlink.Excl,
		},
		Data: append(hdr, attrs...),
	})
	return err
}

func u32p(v uint32) *uint32 { return &v }

const (
	handleRoot    = tc.HandleRoot
	handleIngress = tc.HandleIngress // also clsact's parent
	ethPAll       = 0x0300           // htons(ETH_P_ALL)
	actOK         = 0                // TC_ACT_OK
	actShot       = 2                // TC_ACT_SHOT
	actPipe       = 3                // TC_ACT_PIPE
	actStolen     = 4                // TC_ACT_STOLEN
	egressRedir   = 1                // TCA_EGRESS_REDIR
)

// qdiscAttr returns a minimal valid configuration for each qdisc kind:
// go-tc refuses empty options, and htb, tbf and netem need some.
func qdiscAttr(kind string) (tc.Attribute, bool) {
	a := tc.Attribute{Kind: kind}
	switch kind {
	case "htb":
		a.Htb = &tc.Htb{Init: &tc.HtbGlob{Version: 3, Rate2Quantum: 10}}
	case "tbf":
		// go-tc computes tbf's rate table from the kernel's psched
		// clock, which it reads into its own package state once.
		if err := core.InitializeClock(); err != nil {
			return a, false
		}
		burst := uint32(1600)
		a.Tbf = &tc.Tbf{Parms: &tc.TbfQopt{Mtu: 1514, Limit: 10000, Rate: tc.RateSpec{Rate: 125000, Linklayer: 1}}, Burst: &burst}
	case "cake":
		a.Cake = &tc.Cake{BaseRate: new(uint64)}
	case "fq_codel":
		a.FqCodel = &tc.FqCodel{Limit: u32p(1000)}
	case "codel":
		a.Codel = &tc.Codel{Limit: u32p(1000)}
	case "pie":
		a.Pie = &tc.Pie{Limit: u32p(1000)}
	case "fq_pie":
		a.FqPie = &tc.FqPie{Limit: u32p(1000)}
	case "sfq":
		a.Sfq = &tc.Sfq{V0: tc.SfqQopt{Limit: 127}}
	case "pfifo":
		a.Pfifo = &tc.FifoOpt{Limit: 1000}
	case "bfifo":
		a.Bfifo = &tc.FifoOpt{Limit: 100000}
	case "netem":
		a.Netem = &tc.Netem{Qopt: tc.NetemQopt{Limit: 1000}}
	case "ingress", "clsact":
	default:
		return a, false
	}
	return a, true
}

func (ns *throwawayNS) probe(f Feature) error {
	switch f.Type {
	case TypeQdisc:
		attr, ok := qdiscAttr(f.Name)
		if !ok {
			return fmt.Errorf("features: no probe for qdisc %s", f.Name)
		}
		msg := tc.Msg{Family: unix.AF_UNSPEC, Ifindex: ns.dev, Handle: core.BuildHandle(1, 0), Parent: handleRoot}
		if f.Name == "ingress" || f.Name == "clsact" {
			msg.Handle, msg.Parent = core.BuildHandle(0xFFFF, 0), handleIngress
		}
		if f.Name == "fq_pie" {
			// go-tc v0.4.8 sends TCA_OPTIONS without NLA_F_NESTED, which
			// fq_pie's strict parser rejects ("NLA_F_NESTED is
			// missing"), and it refuses to send no options at all.
			return classify(f, "add qdisc", ns.addQdiscKindOnly(msg, f.Name))
		}
		return classify(f, "add qdisc", ns.tc.Qdisc().Add(&tc.Object{Msg: msg, Attribute: attr}))

	case TypeClassifier:
		if err := ns.tc.Qdisc().Add(&tc.Object{
			Msg:       tc.Msg{Family: unix.AF_UNSPEC, Ifindex: ns.dev, Handle: core.BuildHandle(0xFFFF, 0), Parent: handleIngress},
			Attribute: tc.Attribute{Kind: "ingress"},
		}); err != nil {
			return fmt.Errorf("features: probe %s: needs an ingress qdisc to attach to, which failed: %w", f, err)
		}
		msg := tc.Msg{Family: unix.AF_UNSPEC, Ifindex: ns.dev, Parent: core.BuildHandle(0xFFFF, 0), Info: 1<<16 | ethPAll}
		attr := tc.Attribute{Kind: f.Name}
		classID := u32p(core.BuildHandle(1, 1))
		switch f.Name {
		case "u32":
			attr.U32 = &tc.U32{ClassID: classID, Sel: &tc.U32Sel{Flags: 1 /* TC_U32_TERMINAL */, NKeys: 1, Keys: []tc.U32Key{{}}}}
		case "matchall":
			attr.Matchall = &tc.Matchall{ClassID: classID}
		case "flower":
			attr.Flower = &tc.Flower{ClassID: classID}
		case "fw":
			msg.Handle = 1 // the fwmark to match
			attr.Fw = &tc.Fw{ClassID: classID}
		case "bpf":
			// A one-instruction classic BPF program ("ret #-1": match),
			// which cls_bpf takes without the bpf(2) syscall, so the probe
			// needs nothing beyond what the other classifiers need.
			ops := []byte{0x06, 0, 0, 0, 0xff, 0xff, 0xff, 0xff} // sock_filter{BPF_RET|BPF_K, 0, 0, 0xffffffff}
			n := uint16(1)
			attr.BPF = &tc.Bpf{ClassID: classID, Ops: &ops, OpsLen: &n}
		default:
			return fmt.Errorf("features: no probe for classifier %s", f.Name)
		}
		return classify(f, "add filter", ns.tc.Filter().Add(&tc.Object{Msg: msg, Attribute: attr}))

	case TypeAction:
		index := uint32(1)
		if ns.host {
			// Actions live in the namespace, not on the device: take
			// an index real ones are unlikely to have (an existing one
			// makes the add fail with EEXIST rather than touch it).
			var rnd [4]byte
			if _, err := rand.Read(rnd[:]); err != nil {
				return err
			}
			index = 0x40000000 | binary.BigEndian.Uint32(rnd[:])&0x3fffffff
		}
		// The index goes into the kind's parameters too, where the
		// kernel reads it for most kinds.
		a := &tc.Action{Kind: f.Name, Index: index}
		switch f.Name {
		case "gact":
			a.Gact = &tc.Gact{Parms: &tc.GactParms{Index: index, Action: actOK}}
		case "mirred":
			a.Mirred = &tc.Mirred{Parms: &tc.MirredParam{Index: index, Action: actStolen, Eaction: egressRedir, IfIndex: ns.dev}}
		case "police":
			// A rate needs a 1024-byte rate table go-tc does not build
			// (see go-libs.md); a police with only burst and mtu is
			// enough to show that act_police exists.
			a.Police = &tc.Police{Tbf: &tc.Policy{Index: index, Action: actShot, Burst: 10000, Mtu: 2048}}
		case "skbedit":
			a.SkbEdit = &tc.SkbEdit{Parms: &tc.SkbEditParms{Index: index, Action: actPipe}, Priority: u32p(1)}
		case "ctinfo":
			a.CtInfo = &tc.CtInfo{Act: &tc.CtInfoAct{Index: index, Action: actPipe}, ParmsDscpMask: u32p(0xfc000000), ParmsDscpStateMask: u32p(0x01000000)}
		default:
			return fmt.Errorf("features: no probe for action %s", f.Name)
		}
		err := ns.tc.Actions().Add([]*tc.Action{a})
		if err == nil && ns.host {
			if derr := ns.tc.Actions().Delete([]*tc.Action{{Kind: f.Name, Index: index}}); derr != nil {
				return fmt.Errorf("features: probe %s: delete the probe's action %s index %d: %w", f, f.Name, index, derr)
			}
		}
		return classify(f, "add action", err)

	case TypeLink:
		if ns.host && f.Name == "ifb" {
			return nil // the probe device is one
		}
		err := ns.rtnl.Link.New(&rtnetlink.LinkMessage{
			Family:     unix.AF_UNSPEC,
			Attributes: &rtnetlink.LinkAttributes{Name: "probe0", Info: &rtnetlink.LinkInfo{Kind: f.Name}},
		})
		return classify(f, "add link", err)
	}
	return fmt.Errorf("features: no probe for %s", f)
}

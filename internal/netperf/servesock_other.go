//go:build !linux

package netperf

import "net"

// congestion is not known off Linux: the results say none.
func congestion(*net.TCPConn) string { return "" }

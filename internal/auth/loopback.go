package auth

import (
	"net"
	"net/netip"
	"strings"
)

// LoopbackHost reports whether host (a name or an address, with or
// without a port or IPv6 brackets) can only mean this machine:
// "localhost", a name under ".localhost" (RFC 6761), or a loopback
// address. A node bound to loopback answers only requests whose Host is
// one of these, so that a browser page whose name rebinds to 127.0.0.1
// cannot talk to it (DNS rebinding).
func LoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// LoopbackAddr reports whether a listen address (host:port) binds only
// loopback. An empty host binds every interface, so it does not.
func LoopbackAddr(hostport string) bool {
	h, _, err := net.SplitHostPort(hostport)
	return err == nil && h != "" && LoopbackHost(h)
}

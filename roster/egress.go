package roster

import (
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// EgressAllowed reports whether a door URL may be reached under a capabilities.network.allow list.
// Entries are host names (case-insensitive), optionally "host:port"; "localhost" covers every loopback
// address (127.0.0.0/8, ::1, "localhost"); "*" allows everything. A URL that does not parse, or has no host, is refused.
//
// An IP address entry matches the same address however it is written ("::1", "[::1]",
// "0:0:0:0:0:0:0:1"); an entry with a port matches only that port, where a URL without a port has its
// scheme's (80 for http, 443 for https).
func EgressAllowed(doorURL string, allow []string) bool {
	u, err := url.Parse(doorURL)
	if err != nil {
		return false
	}
	host := canonicalHost(u.Hostname())
	if host == "" {
		return false
	}
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	for _, entry := range allow {
		entry = strings.TrimSpace(entry)
		if entry == "*" {
			return true
		}
		entryHost, entryPort := splitEntry(entry)
		if entryHost == "" || (entryPort != "" && entryPort != port) {
			continue
		}
		if entryHost == "localhost" && isLoopback(host) || sameHost(entryHost, host) {
			return true
		}
	}
	return false
}

// splitEntry splits an allow entry into its canonical host and its port ("" when it names none).
func splitEntry(entry string) (host, port string) {
	if h, p, err := net.SplitHostPort(entry); err == nil {
		return canonicalHost(h), p
	}
	// A bare IPv6 address has colons but no port.
	return canonicalHost(entry), ""
}

// canonicalHost lowercases host and drops IPv6 brackets and the trailing dot of a fully qualified name.
func canonicalHost(host string) string {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.Unmap().IsLoopback()
}

func sameHost(a, b string) bool {
	if a == b {
		return true
	}
	x, errX := netip.ParseAddr(a)
	y, errY := netip.ParseAddr(b)
	return errX == nil && errY == nil && x.Unmap() == y.Unmap()
}

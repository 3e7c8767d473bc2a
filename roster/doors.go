package roster

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// slot is a member's parsed listen address.
type slot struct {
	host     string
	port     int
	explicit bool
}

// listen checks a listen address; the host may be empty (every interface), an IP address or a host name.
func (p *parser) listen(line int, who, addr string) (string, int, bool) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		p.add(line, fmt.Sprintf("listen %q of %s is not host:port", addr, who),
			"write the door's address with its port, such as listen: 127.0.0.1:7101 (or [::1]:7101), or remove the key for a default")
		return "", 0, false
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		p.add(line, fmt.Sprintf("listen %q of %s has a bad port %q", addr, who, portText),
			"write a port from 1 to 65535, such as listen: 127.0.0.1:7101 (or 0 for one the system picks)")
		return "", 0, false
	}
	if !validHost(host) {
		p.add(line, fmt.Sprintf("listen %q of %s has a bad host %q", addr, who, host),
			"write an IP address or a host name, such as listen: 127.0.0.1:7101")
		return "", 0, false
	}
	return host, port, true
}

var hostPattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.?$`)

func validHost(host string) bool {
	if host == "" {
		return true
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return hostPattern.MatchString(host)
}

// checkListenClashes reports members whose listen: addresses collide: two doors cannot share an address,
// and a wildcard host shares every address of its port.
func (p *parser) checkListenClashes(out []Member, slots []slot, listenLines []int) {
	for i := range slots {
		if !slots[i].explicit {
			continue
		}
		for j := range i {
			// Port 0 asks the system for a free port, so any number of members may use it.
			if slots[j].explicit && slots[i].port != 0 && slots[i].port == slots[j].port && overlap(slots[i].host, slots[j].host) {
				p.add(listenLines[i], fmt.Sprintf("listen %s of %s is already used by %s (line %d)",
					out[i].Listen, label(out[i].Name), label(out[j].Name), listenLines[j]),
					"give each member its own port, or remove listen: to get a free one")
				break
			}
		}
	}
}

// assignDefaultPorts gives each member without listen: the next port from firstDefaultPort that no
// member's listen: takes, on defaultHost.
func assignDefaultPorts(out []Member, slots []slot) {
	used := map[int]bool{}
	for _, s := range slots {
		if s.explicit {
			used[s.port] = true
		}
	}
	next := firstDefaultPort
	for i := range out {
		if out[i].Listen != "" {
			continue
		}
		for used[next] {
			next++
		}
		used[next] = true
		out[i].Listen = net.JoinHostPort(defaultHost, strconv.Itoa(next))
		slots[i] = slot{host: defaultHost, port: next}
	}
}

// deriveURLs gives each member without url: the URL of its listen address, and reports two members
// reached at one URL that a url: key wrote.
func (p *parser) deriveURLs(out []Member, slots []slot, urlLines []int) {
	seenURL := map[string]int{}
	for i := range out {
		if out[i].URL == "" && slots[i].port != 0 {
			host := slots[i].host
			if isWildcard(host) {
				host = defaultHost
			}
			out[i].URL = "http://" + net.JoinHostPort(host, strconv.Itoa(slots[i].port))
		}
		if out[i].URL == "" {
			continue
		}
		// Derived URLs collide only where listen addresses do, which checkListenClashes reports.
		if j, dup := seenURL[out[i].URL]; dup && (urlLines[i] != 0 || urlLines[j] != 0) {
			line := urlLines[i]
			if line == 0 {
				line = out[i].Line
			}
			p.add(line, fmt.Sprintf("%s is reached at %s, as %s is (line %d)", label(out[i].Name), out[i].URL, label(out[j].Name), out[j].Line),
				"give each member a door of its own: a different url:, or a different listen: port")
			continue
		}
		seenURL[out[i].URL] = i
	}
}

func isWildcard(host string) bool {
	return host == "" || host == "0.0.0.0" || host == "::"
}

// overlap reports whether doors listening on the same port at hosts a and b would collide.
func overlap(a, b string) bool {
	if isWildcard(a) || isWildcard(b) {
		return true
	}
	return sameHost(canonicalHost(a), canonicalHost(b)) ||
		strings.EqualFold(a, "localhost") && b == defaultHost || strings.EqualFold(b, "localhost") && a == defaultHost
}

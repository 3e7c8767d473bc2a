package push

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// Allowlist is push.allow: the webhook hosts a config may name.
type Allowlist struct {
	any      bool            // "*": every public host
	names    map[string]bool // exact host names (lowercase, no trailing dot)
	suffixes []string        // "*.example.com" as ".example.com"
	prefixes []netip.Prefix  // IP addresses (as /32, /128) and CIDR prefixes
	raw      []string
}

// NewAllowlist builds the allowlist of entries (push.allow, already checked by the capsule's parser).
func NewAllowlist(entries []string) (Allowlist, error) {
	a := Allowlist{names: map[string]bool{}, raw: entries}
	for _, e := range entries {
		e = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(e), "."))
		switch {
		case e == "*":
			a.any = true
		case strings.HasPrefix(e, "*."):
			a.suffixes = append(a.suffixes, e[1:])
		case strings.Contains(e, "/"):
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return Allowlist{}, fmt.Errorf("push.allow entry %q is not a CIDR prefix", e)
			}
			a.prefixes = append(a.prefixes, p.Masked())
		default:
			if ip, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
				a.prefixes = append(a.prefixes, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
				continue
			}
			a.names[e] = true
		}
	}
	return a, nil
}

// ErrNotAllowed is the failure of a webhook outside the allowlist.
var ErrNotAllowed = errors.New("webhook not allowed")

// special reports whether ip is an address a webhook reaches only when push.allow names it: loopback,
// private, link-local, unspecified, multicast, or shared (100.64.0.0/10).
func special(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() ||
		netip.MustParsePrefix("100.64.0.0/10").Contains(ip)
}

func (a Allowlist) inPrefixes(ip netip.Addr) bool {
	for _, p := range a.prefixes {
		if p.Contains(ip.Unmap()) {
			return true
		}
	}
	return false
}

// hostMatches reports whether a host name is on the list, and whether it is named exactly.
func (a Allowlist) hostMatches(host string) (matched, exact bool) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if a.names[host] {
		return true, true
	}
	for _, s := range a.suffixes {
		if strings.HasSuffix(host, s) {
			return true, false
		}
	}
	return a.any, false
}

// CheckURL checks a webhook URL when a config is created: an http or https URL whose host the list
// allows. The error says what is wrong and what to write.
func (a Allowlist) CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("%w: %q is not an http or https URL with a host (and no user:password@): write it as https://host/path", ErrNotAllowed, cut(raw))
	}
	if len(a.raw) == 0 {
		return nil, fmt.Errorf("%w: push.allow in this member's murmur.yaml lists no webhook host, so no webhook is accepted; add %q to push.allow", ErrNotAllowed, u.Hostname())
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if a.inPrefixes(ip) {
			return u, nil
		}
		if special(ip) {
			return nil, fmt.Errorf("%w: %s is a loopback, private or link-local address, which a webhook may use only when push.allow names it; add %s to push.allow", ErrNotAllowed, host, host)
		}
		if a.any {
			return u, nil
		}
		return nil, fmt.Errorf("%w: %s is not in push.allow (%s); add it there", ErrNotAllowed, host, strings.Join(a.raw, ", "))
	}
	if ok, _ := a.hostMatches(host); !ok {
		return nil, fmt.Errorf("%w: host %s is not in push.allow (%s); add it there", ErrNotAllowed, host, strings.Join(a.raw, ", "))
	}
	return u, nil
}

// checkAddr checks an address host resolved to when the notifier connects.
func (a Allowlist) checkAddr(host string, ip netip.Addr) error {
	if a.inPrefixes(ip) {
		return nil
	}
	matched, exact := a.hostMatches(host)
	if _, err := netip.ParseAddr(host); err == nil {
		matched, exact = a.any, false
	}
	switch {
	case !matched:
		return fmt.Errorf("%w: host %s is no longer in push.allow", ErrNotAllowed, host)
	case special(ip) && !exact:
		return fmt.Errorf("%w: %s resolves to %s, a loopback, private or link-local address that push.allow does not name; add %s or %s to push.allow", ErrNotAllowed, host, ip, host, ip)
	}
	return nil
}

// dialer connects only to addresses the list allows: it resolves the host itself, checks every
// address, and dials a checked one, so a name cannot resolve to another address between check and use.
func (a Allowlist) dialer(base *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		var ips []netip.Addr
		if ip, err := netip.ParseAddr(host); err == nil {
			ips = []netip.Addr{ip}
		} else {
			found, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			if err != nil {
				return nil, err
			}
			ips = found
		}
		var last error
		for _, ip := range ips {
			if err := a.checkAddr(host, ip); err != nil {
				last = err
				continue
			}
			c, err := base.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
			if err == nil {
				return c, nil
			}
			last = err
		}
		if last == nil {
			last = fmt.Errorf("%s resolves to no address", host)
		}
		return nil, last
	}
}

func cut(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

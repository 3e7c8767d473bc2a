package capsule

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/murmur-run/murmur/internal/yamldoc"
	"gopkg.in/yaml.v3"
)

// Push is the push: block: where this member's door may deliver push notifications.
type Push struct {
	// Allow lists the webhook hosts push notification configs may name: a host name, "*.domain", an IP
	// address, a CIDR prefix, or "*" for every public host. Loopback, private and link-local addresses
	// are reached only when an entry names them (an IP, a prefix or the exact host name); "*" never covers
	// them. Empty: no webhook is accepted.
	Allow []string
	// MaxConfigsPerTask bounds the push notification configs of one task; MaxConfigsPerCaller those one
	// caller (the operator, a peer) has on tasks that have not ended or with notifications still to
	// deliver. 0: the notifier's defaults (10, 100).
	MaxConfigsPerTask, MaxConfigsPerCaller int
}

// ControlToken is one entry of control.tokens: a control token the operator keeps in a file.
type ControlToken struct {
	ID        string
	TokenFile string // absolute
}

var (
	hostLabelRE      = regexp.MustCompile(`^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.?$`)
	controlTokenIDRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)
)

// ValidPushHost reports whether s is a valid push.allow entry, and if not why.
func ValidPushHost(s string) error {
	switch {
	case s == "*":
		return nil
	case strings.Contains(s, "/"):
		if _, err := netip.ParsePrefix(s); err != nil {
			return fmt.Errorf("%q is not a CIDR prefix such as 10.0.0.0/8", s)
		}
		return nil
	case net.ParseIP(strings.Trim(s, "[]")) != nil:
		return nil
	case hostLabelRE.MatchString(s):
		return nil
	}
	return fmt.Errorf("%q is not a host name, *.domain, IP address, CIDR prefix or *", s)
}

// push parses the push: block.
func (p *capsuleParser) push(v *yaml.Node) {
	d, c := p.d, p.c
	d.Fields(v, "push", []yamldoc.Field{{Name: "allow", Fn: func(_, v *yaml.Node) {
		list, ok := d.Texts(v, "push.allow")
		if !ok {
			return
		}
		for i, s := range list {
			if err := ValidPushHost(s); err != nil {
				d.Add(yamldoc.ItemLine(v, i), "push.allow entry "+err.Error(),
					"write the webhook's host (hooks.example.com), *.example.com, an address (127.0.0.1), a prefix (10.0.0.0/8) or *")
			}
		}
		c.Push.Allow = list
	}}, {Name: "max_configs_per_task", Fn: func(_, v *yaml.Node) {
		c.Push.MaxConfigsPerTask = p.pushBound(v, "push.max_configs_per_task", "10")
	}}, {Name: "max_configs_per_caller", Fn: func(_, v *yaml.Node) {
		c.Push.MaxConfigsPerCaller = p.pushBound(v, "push.max_configs_per_caller", "100")
	}}})
}

// pushBound reads a bound of push configs: a whole number of 1 or more (def: the default, for the fix).
func (p *capsuleParser) pushBound(v *yaml.Node, path, def string) int {
	fix := p.d.WholeFix
	p.d.WholeFix = "write a whole number of 1 or more, such as %s: " + def
	n, ok := p.d.CountInt(v, path)
	p.d.WholeFix = fix
	if ok && n == 0 {
		p.d.Add(yamldoc.Deref(v).Line, path+" is 0, so no webhook could ever be registered",
			"write at least 1, or remove the key for the default of "+def+" (omit push.allow to offer no webhooks)")
	}
	return n
}

// controlTokens parses control.tokens: [{id, token_file}].
func (p *capsuleParser) controlTokens(v *yaml.Node) {
	d, c := p.d, p.c
	if !yamldoc.IsSeq(v) {
		d.Add(v.Line, "control.tokens must be a list of {id, token_file}", "write tokens: [{id: ops, token_file: ops.token}]")
		return
	}
	seen := map[string]bool{}
	for i, item := range yamldoc.Deref(v).Content {
		path := fmt.Sprintf("control.tokens[%d]", i)
		var t ControlToken
		var idLine int
		ok := d.Fields(item, path, []yamldoc.Field{
			{Name: "id", Fn: func(_, v *yaml.Node) { t.ID, _ = d.Text(v, path+".id"); idLine = v.Line }},
			{Name: "token_file", Fn: func(_, v *yaml.Node) {
				f, _ := d.Text(v, path+".token_file")
				if f != "" && !filepath.IsAbs(f) {
					f = filepath.Join(c.Dir, f)
				}
				t.TokenFile = f
			}},
		})
		if !ok {
			continue
		}
		switch {
		case t.ID == "" || t.TokenFile == "":
			d.Add(item.Line, path+" needs both id and token_file", "write {id: ops, token_file: ops.token}")
		case !controlTokenIDRE.MatchString(t.ID):
			d.Add(idLine, fmt.Sprintf("%s.id %q is not an id", path, t.ID), "use lowercase letters, digits, '.', '_' and '-'")
		case seen[t.ID]:
			d.Add(idLine, fmt.Sprintf("%s.id %q is used twice", path, t.ID), "give each control token its own id")
		default:
			seen[t.ID] = true
			c.Control.Tokens = append(c.Control.Tokens, t)
		}
	}
}

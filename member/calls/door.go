package calls

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/internal/peercred"
	"github.com/murmur-run/murmur/roster"
)

// doorPeers calls peers' doors over HTTP. It presents this member's own peer credential (package
// peercred), for the trust class of the task it calls for; the formation secret is never sent.
//
// A peer's clients are made at the first call to it: a member of a formation of a thousand calls a
// few of the others, and clients for all of them, in every member, were two million at start.
type doorPeers struct {
	roster *roster.Roster
	hc     *http.Client
	creds  map[ids.Trust]string // this member's credential, by trust class

	mu      sync.Mutex
	clients map[string]map[ids.Trust]*a2a.Client // by member, then trust class; guarded by mu
}

// DoorPeers reaches the doors of r's members over HTTP as the member self, with the credentials key
// derives, each request carrying the trace context of its context; errors may name addresses, which the
// caller never shows to a model. r's members' URLs must not change afterwards.
func DoorPeers(r *roster.Roster, self string, key peercred.Key, hc *http.Client) Peers {
	return &doorPeers{roster: r, clients: map[string]map[ids.Trust]*a2a.Client{},
		hc: tracedClient(hc), // each request carries its trace context (traceparent)
		creds: map[ids.Trust]string{
			peercred.Trusted:   key.Credential(self, peercred.Trusted),
			peercred.Untrusted: key.Credential(self, peercred.Untrusted),
		}}
}

// client returns the client for member that presents the credential of the trust class; reads and
// cancels present the untrusted one, since only a task's creation depends on the class.
func (p *doorPeers) client(member string, trust ids.Trust) (*a2a.Client, error) {
	if trust != peercred.Trusted {
		trust = peercred.Untrusted
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.clients[member]
	if !ok {
		m, ok := p.roster.Member(member)
		if !ok {
			return nil, fmt.Errorf("no member %q in the roster", member)
		}
		url := strings.TrimRight(m.URL, "/") + "/a2a"
		c = map[ids.Trust]*a2a.Client{}
		for class, cred := range p.creds {
			c[class] = a2a.NewClient(url, cred, p.hc)
		}
		p.clients[member] = c
	}
	return c[trust], nil
}

func (p *doorPeers) Send(ctx context.Context, member string, msg *a2a.Message) (*a2a.Task, error) {
	c, err := p.client(member, ids.TrustOf(ids.Murmur(msg.Metadata)))
	if err != nil {
		return nil, err
	}
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg, Configuration: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		return nil, err
	}
	if res.Task == nil {
		return nil, fmt.Errorf("the door answered with a message, not a task")
	}
	return res.Task, nil
}

func (p *doorPeers) Get(ctx context.Context, member string, id a2a.TaskID) (*a2a.Task, error) {
	c, err := p.client(member, peercred.Untrusted)
	if err != nil {
		return nil, err
	}
	zero := 0
	return c.GetTask(ctx, &a2a.GetTaskRequest{ID: id, HistoryLength: &zero})
}

func (p *doorPeers) Cancel(ctx context.Context, member string, id a2a.TaskID) error {
	c, err := p.client(member, peercred.Untrusted)
	if err != nil {
		return err
	}
	_, err = c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: id})
	return err
}

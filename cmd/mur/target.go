package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/roster"
	"github.com/murmur-run/murmur/server"
)

// target are the flags that say which door a client command talks to.
type target struct {
	door    string
	member  string
	roster  string
	token   string
	dataDir string

	envDataDir string // MUR_DATA_DIR: a --data-dir equal to it need not be repeated in a hint
}

func (t *target) register(fs *flag.FlagSet, getenv func(string) string) {
	t.envDataDir = getenv("MUR_DATA_DIR")
	fs.StringVar(&t.door, "door", "", "the door's base URL, e.g. http://127.0.0.1:7101")
	fs.StringVar(&t.member, "member", "", "the member to talk to, found in --roster")
	fs.StringVar(&t.roster, "roster", "", "the roster.yaml that lists --member (default: the entry member when --member is empty)")
	fs.StringVar(&t.token, "token", getenv("MUR_OPERATOR_TOKEN"), "the operator token (env MUR_OPERATOR_TOKEN; default: read from the data directory beside the roster)")
	fs.StringVar(&t.dataDir, "data-dir", t.envDataDir, "data directory holding operator.token (default .murmur/ beside the roster)")
}

// door is one member's door.
type door struct {
	member string // "" when only --door names it
	base   string // the door's base URL, without /a2a
	client *a2a.Client
}

// conn is what a client command talks to: the door its flags name (the entry member's when a roster is
// named without --member), and, when a roster is named, every other door of the formation.
type conn struct {
	t     *target
	r     *roster.Roster // nil when only --door names the door
	token string
	hc    *http.Client // its own connections, closed by close
	door  door
}

// connect resolves the target's door and token.
func (t *target) connect() (*conn, error) {
	c := &conn{t: t}
	if t.roster != "" {
		var err error
		if c.r, err = roster.Load(t.roster); err != nil {
			return nil, usageError{err}
		}
	}
	switch {
	case t.door != "" && (t.member != "" || t.roster != ""):
		return nil, usagef("give either --door URL or --roster FILE (with --member NAME), not both")
	case t.door == "" && c.r == nil && t.member != "":
		return nil, usagef("--member %s needs the formation's roster: add --roster FILE", t.member)
	case t.door == "" && c.r == nil:
		return nil, usagef("say which door to talk to: --roster FILE (the entry member, or --member NAME), or --door URL")
	}
	c.token = t.token
	if c.token == "" && c.r != nil {
		path := filepath.Join(dataDir(t.dataDir, c.r), server.OperatorTokenFile)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, usagef("no operator token in %s (%v): start the formation once with mur run --roster %s, which writes it, or set MUR_OPERATOR_TOKEN or --token",
				path, errors.Unwrap(err), shellQuote(t.roster))
		}
		c.token = strings.TrimSpace(string(b))
	}
	if c.token == "" {
		return nil, usagef("no operator token: set MUR_OPERATOR_TOKEN or --token (with --roster FILE, mur reads the one mur run wrote beside it)")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	c.hc = &http.Client{Transport: tr}
	if t.door != "" {
		u, err := url.Parse(t.door)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usagef("--door %q is not a door's URL: write it as mur run prints it, such as http://127.0.0.1:7101", t.door)
		}
		c.door = c.newDoor("", t.door)
		return c, nil
	}
	name := t.member
	if name == "" {
		name = c.defaultMember()
	}
	d, err := c.doorOf(name)
	if err != nil {
		return nil, err
	}
	c.door = d
	return c, nil
}

// close ends the connections the command opened.
func (c *conn) close() { c.hc.CloseIdleConnections() }

func (c *conn) newDoor(member, base string) door {
	base = strings.TrimSuffix(strings.TrimRight(base, "/"), "/a2a")
	return door{member: member, base: base, client: a2a.NewClient(base+"/a2a", c.token, c.hc)}
}

// defaultMember is the member a roster's commands talk to without --member: its entry, else its first.
func (c *conn) defaultMember() string {
	if c.r.Entry != "" {
		return c.r.Entry
	}
	return c.r.Names()[0]
}

// doorOf returns the door of a member of the roster.
func (c *conn) doorOf(name string) (door, error) {
	m, ok := c.r.Member(name)
	if !ok {
		return door{}, usagef("%s: no member named %q; the members are %s", c.r.Path, name, strings.Join(c.r.Names(), ", "))
	}
	if m.URL == "" {
		return door{}, usagef("member %s of %s listens on a port the system picks (listen: %s), so only the mur run serving it knows its URL: "+
			"give it with --door as mur run printed it, or write a fixed port in listen:", name, c.r.Path, m.Listen)
	}
	return c.newDoor(name, m.URL), nil
}

// members returns the roster's members, the default one first; nil without a roster.
func (c *conn) members() []string {
	if c.r == nil {
		return nil
	}
	first := c.defaultMember()
	out := []string{first}
	for _, n := range c.r.Names() {
		if n != first {
			out = append(out, n)
		}
	}
	return out
}

// flagsFor returns the flags a command printed for the user repeats so that it reaches member's door
// from where the user stands, each with a leading space: --door, or --roster with --member unless
// member is the default one, and --data-dir unless MUR_DATA_DIR gives it. A token is never repeated.
func (c *conn) flagsFor(member string) string {
	var b strings.Builder
	switch {
	case c.t.door != "":
		fmt.Fprintf(&b, " --door %s", shellQuote(c.t.door))
	case c.r != nil:
		fmt.Fprintf(&b, " --roster %s", shellQuote(c.t.roster))
		if member != "" && member != c.defaultMember() {
			fmt.Fprintf(&b, " --member %s", shellQuote(member))
		}
	}
	if c.t.dataDir != "" && c.t.dataDir != c.t.envDataDir {
		fmt.Fprintf(&b, " --data-dir %s", shellQuote(c.t.dataDir))
	}
	return b.String()
}

// where names a door for a message: its member, or its URL.
func (d door) where() string {
	if d.member != "" {
		return d.member
	}
	return d.base
}

// explain adds to an error of a door's what the user can do about it: a door that does not answer may
// not be running.
func (c *conn) explain(d door, err error) error {
	var ue *url.Error
	if err == nil || !errors.As(err, &ue) {
		return err
	}
	return fmt.Errorf("%w\n%s", err, c.notRunning(d))
}

// notRunning says what to do when a door does not answer.
func (c *conn) notRunning(d door) string {
	if c.r != nil {
		return "mur: is the formation running? start it with: mur run --roster " + shellQuote(c.t.roster)
	}
	return fmt.Sprintf("mur: check --door %s: it is the URL mur run printed for the member, and the formation must be running", d.base)
}

// findTask reads task id (without its history) from the door the flags name; when they name a roster
// and no member, from whichever member has it, the default member first.
func (c *conn) findTask(ctx context.Context, id a2a.TaskID) (door, *a2a.Task, error) {
	none := 0
	get := func(d door) (*a2a.Task, error) {
		return d.client.GetTask(ctx, &a2a.GetTaskRequest{ID: id, HistoryLength: &none})
	}
	if c.r == nil || c.t.member != "" {
		task, err := get(c.door)
		if errors.Is(err, a2a.ErrTaskNotFound) {
			return door{}, nil, fmt.Errorf("%s has no task %s: check the id (mur tasks%s lists the member's tasks)", c.door.where(), id, c.flagsFor(c.door.member))
		}
		return c.door, task, c.explain(c.door, err)
	}
	var asked, down []string
	for _, name := range c.members() {
		d, err := c.doorOf(name)
		if err != nil {
			down = append(down, fmt.Sprintf("%s (%v)", name, err))
			continue
		}
		task, err := get(d)
		switch {
		case err == nil:
			return d, task, nil
		case errors.Is(err, a2a.ErrTaskNotFound):
			asked = append(asked, name)
		default:
			var ue *url.Error
			if errors.As(err, &ue) {
				down = append(down, name)
				continue
			}
			return door{}, nil, err
		}
	}
	if len(asked) == 0 {
		return door{}, nil, fmt.Errorf("no door of formation %s answers (%s)\n%s", c.r.Formation, strings.Join(down, ", "), c.notRunning(c.door))
	}
	msg := fmt.Sprintf("no member of formation %s has task %s (asked %s)", c.r.Formation, id, strings.Join(asked, ", "))
	if len(down) > 0 {
		msg += fmt.Sprintf("; %s did not answer", strings.Join(down, ", "))
	}
	return door{}, nil, fmt.Errorf("%s: check the id (mur tasks%s lists %s's tasks; add --member NAME for another member's)", msg, c.flagsFor(""), c.defaultMember())
}

// sendHint is the mur send that mur run prints for member, whose door it serves at doorURL: with the
// roster when the roster names that URL (the token is then read beside it), else with --door and the
// token from where mur run keeps it (tokenRef, a shell expression).
func sendHint(c common, r *roster.Roster, member, doorURL, tokenRef string, getenv func(string) string) string {
	if m, ok := r.Member(member); ok && m.URL == doorURL && c.doorURLs == "" {
		hint := "mur send --roster " + shellQuote(c.roster)
		if member != r.Entry && !(r.Entry == "" && member == r.Names()[0]) {
			hint += " --member " + shellQuote(member)
		}
		if c.dataDir != "" && c.dataDir != getenv("MUR_DATA_DIR") {
			hint += " --data-dir " + shellQuote(c.dataDir)
		}
		return hint + " --wait hello"
	}
	if getenv("MUR_OPERATOR_TOKEN") != "" {
		return "mur send --door " + doorURL + " --wait hello"
	}
	return "MUR_OPERATOR_TOKEN=" + tokenRef + " mur send --door " + doorURL + " --wait hello"
}

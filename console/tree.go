package console

import (
	"regexp"
	"slices"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member/records"
)

// traceIDForm is a W3C trace id in hex, as records and metadata.murmur.trace_id carry it.
var traceIDForm = regexp.MustCompile(`^[0-9a-f]{32}$`)

// Delegation is a delegate-task delegation as the delegating session's records tell it: the task it
// handed to a sub-session of the same member.
type Delegation struct {
	ID         string
	From       string // the delegating member
	FromTask   string
	Capsule    string
	SubSession string
	SubTask    string
	Started    time.Time
	Status     string // "" until it ended
}

// delegation notes a delegation_start or delegation record of f's session.
func (x *index) delegation(f *traceFile, rec Record) {
	id := rec.Str("delegation_id")
	d := x.dlgs[id]
	if d == nil {
		d = &Delegation{ID: id, Started: rec.TS}
		x.dlgs[id] = d
	}
	d.From, d.FromTask, d.Capsule = f.member, rec.Task, rec.Str("capsule")
	if s := rec.Str("sub_session"); s != "" {
		d.SubSession, d.SubTask = s, rec.Str("sub_task")
	}
	if rec.Type == records.TypeDelegation {
		d.Status = rec.Str("status")
	}
}

// TreeNode is one task of the tree of tasks one request caused, as the records tell it.
type TreeNode struct {
	Depth   int
	Member  string
	ID      string
	Link    string
	Via     string // how its parent caused it: "call" (call-member) or "delegation" (delegate-task); "" for the root
	Capsule string // the sub-capsule, for a delegation
	State   string // how it ended, from its task_end record; "" while it runs or when its records are not here
	Tokens  Tokens // its own inference records
	Current bool   // the task whose page shows the tree
}

// edge is one task caused by another.
type edge struct {
	parent, child string
	member        string // the child's member
	via, capsule  string
	at            time.Time
}

// maxTree bounds the tasks a tree shows, and how deep it is followed.
const maxTree, maxTreeDepth = 200, 32

// tree returns the tree of tasks the request that caused task caused: its root (the task the request
// made) first, each task followed by those it caused, in the order they were started. A task that
// caused none and was caused by none has no tree (nil).
func (x *index) tree(task, member string) []TreeNode {
	x.mu.Lock()
	defer x.mu.Unlock()
	var edges []edge
	for _, c := range x.calls {
		if c.FromTask != "" && c.ToTask != "" {
			edges = append(edges, edge{parent: c.FromTask, child: c.ToTask, member: c.To, via: "call", at: c.Started})
		}
	}
	for _, d := range x.dlgs {
		if d.FromTask != "" && d.SubTask != "" {
			edges = append(edges, edge{parent: d.FromTask, child: d.SubTask, member: d.From, via: "delegation", capsule: d.Capsule, at: d.Started})
		}
	}
	slices.SortFunc(edges, func(a, b edge) int { return a.at.Compare(b.at) })
	up := map[string]edge{}
	down := map[string][]edge{}
	members := map[string]string{task: member}
	for _, e := range edges {
		up[e.child] = e
		down[e.parent] = append(down[e.parent], e)
		members[e.child] = e.member
	}
	for _, e := range edges { // a parent's member: where its records are, else its child's caller
		if _, ok := members[e.parent]; !ok {
			if f := x.taskFile[e.parent]; f != nil {
				members[e.parent] = f.member
			}
		}
	}
	for _, c := range x.calls {
		if _, ok := members[c.FromTask]; !ok && c.FromTask != "" {
			members[c.FromTask] = c.From
		}
	}
	root := task
	for seen := map[string]bool{task: true}; ; {
		e, ok := up[root]
		if !ok || seen[e.parent] || len(seen) > maxTreeDepth {
			break
		}
		seen[e.parent] = true
		root = e.parent
	}
	if root == task && len(down[task]) == 0 {
		return nil
	}
	var nodes []TreeNode
	var walk func(id string, via edge, depth int)
	visited := map[string]bool{}
	walk = func(id string, via edge, depth int) {
		if visited[id] || len(nodes) >= maxTree || depth > maxTreeDepth {
			return
		}
		visited[id] = true
		n := TreeNode{Depth: depth, Member: members[id], ID: id, Via: via.via, Capsule: via.capsule, Current: id == task}
		if n.Member != "" {
			n.Link = "/members/" + n.Member + "/tasks/" + id
		}
		for _, r := range x.byTask[id] {
			switch r.Type {
			case records.TypeInference:
				n.Tokens.add(r)
			case records.TypeTaskEnd:
				n.State = shortStateWord(r.Str("state"))
			}
		}
		nodes = append(nodes, n)
		for _, e := range down[id] {
			walk(e.child, e, depth+1)
		}
	}
	walk(root, edge{}, 0)
	return nodes
}

// shortStateWord is a task_end record's state without its TASK_STATE_ prefix, in lower case.
func shortStateWord(s string) string {
	if s == "" {
		return ""
	}
	return shortState(a2a.TaskState(s))
}

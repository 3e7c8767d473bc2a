package console

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/murmur-run/murmur/a2a"
)

// The pages, each a handler and the data its template gets: the formation, a member, a task. What a task
// page holds is task.go's; the doors are asked in door.go, the records read in taskrecords.go.

// formationData is the formation page.
type formationData struct {
	Members []MemberView
	Graph   Graph
	Recent  []TaskRow
	Damage  []Damage
	Records string
	Entry   string
}

// formationView is the formation page: every member with its tokens and the calls it has in flight, the
// graph of who may call whom, the fifteen tasks updated last, and the damaged lines of the records.
func (c *Console) formationView() formationData {
	tokens, calls, damage := c.records.snapshot()
	inflight := map[string]int{}
	for _, cl := range calls {
		if !cl.Ended && cl.To != "" {
			inflight[cl.From+">"+cl.To]++
		}
	}
	d := formationData{Damage: damage, Records: c.cfg.RecordsRoot, Entry: c.cfg.Roster.Entry}
	for _, m := range c.members {
		v := m.view()
		v.Tokens = tokens[m.Name]
		v.Entry = m.Name == c.cfg.Roster.Entry
		v.CanCall = c.cfg.Roster.Reachable(m.Name)
		for k, n := range inflight {
			if strings.HasPrefix(k, m.Name+">") {
				v.Inflight += n
			}
		}
		d.Members = append(d.Members, v)
		d.Recent = append(d.Recent, m.rows("", "", 10)...)
	}
	slices.SortStableFunc(d.Recent, func(a, b TaskRow) int { return b.Updated.Compare(a.Updated) }) // newest first
	if len(d.Recent) > 15 {
		d.Recent = d.Recent[:15]
	}
	d.Graph = layoutGraph(d.Members, inflight)
	return d
}

// formationPage is the formation.
func (c *Console) formationPage(w http.ResponseWriter, r *http.Request, s *loginSession) {
	c.renderPage(w, r, http.StatusOK, "formation", c.newPage(s, "Formation "+c.cfg.Roster.Formation, "formation", c.formationView()))
}

// memberData is a member's task list.
type memberData struct {
	Member    MemberView
	Tasks     []TaskRow
	State     string
	ContextID string
	States    []StateCount
}

// memberPage is a member's tasks, filtered by ?state= (with or without TASK_STATE_) and ?context=.
func (c *Console) memberPage(w http.ResponseWriter, r *http.Request, s *loginSession) {
	name := r.PathValue("member")
	m := c.byName[name]
	if m == nil {
		c.errorPage(w, r, http.StatusNotFound, "No such member",
			fmt.Sprintf("The formation %s has no member %q; its members are %s.", c.cfg.Roster.Formation, cut(name, 64), strings.Join(c.names(), ", ")))
		return
	}
	q := r.URL.Query()
	state := q.Get("state")
	if state != "" && !strings.HasPrefix(state, "TASK_STATE_") {
		state = "TASK_STATE_" + strings.ToUpper(state)
	}
	if state != "" && !a2a.TaskState(state).Valid() {
		c.errorPage(w, r, http.StatusBadRequest, "No such task state",
			fmt.Sprintf("%q is not a task state; use one of submitted, working, input_required, auth_required, completed, failed, canceled, rejected.", cut(q.Get("state"), 64)))
		return
	}
	ctxID := strings.TrimSpace(q.Get("context"))
	v := m.view()
	d := memberData{Member: v, Tasks: m.rows(a2a.TaskState(state), ctxID, 200), State: state, ContextID: ctxID, States: v.Counts}
	c.renderPage(w, r, http.StatusOK, "member", c.newPage(s, "Member "+name, name, d))
}

// names are the members' names, in roster order.
func (c *Console) names() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.Name)
	}
	return out
}

// taskIDForm is what the console takes for a task id before it asks a door about one.
var taskIDForm = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// findTask sends /tasks/ID to the member the records or the polled lists place it at, or asks each door.
func (c *Console) findTask(w http.ResponseWriter, r *http.Request, s *loginSession) {
	id := r.PathValue("task")
	if !taskIDForm.MatchString(id) {
		c.errorPage(w, r, http.StatusBadRequest, "Not a task id", fmt.Sprintf("%q is not a task id: a task id looks like tsk_01… (letters, digits, _ and -).", cut(id, 64)))
		return
	}
	member := c.records.memberOf(id)
	if member == "" {
		for _, m := range c.members {
			m.mu.Lock()
			_, ok := m.tasks[id]
			m.mu.Unlock()
			if ok {
				member = m.Name
				break
			}
		}
	}
	if member == "" {
		member = c.doorWithTask(r.Context(), id)
	}
	if member == "" {
		c.errorPage(w, r, http.StatusNotFound, "Unknown task",
			fmt.Sprintf("No member of %s knows a task %s: not in the records, and no door that answered has it. It may have been removed by the store's retention, or belong to another formation.", c.cfg.Roster.Formation, id))
		return
	}
	http.Redirect(w, r, "/members/"+member+"/tasks/"+id, http.StatusSeeOther)
}

// taskPage is a task: what its door and its records say of it.
func (c *Console) taskPage(w http.ResponseWriter, r *http.Request, s *loginSession) {
	name, id := r.PathValue("member"), r.PathValue("task")
	m := c.byName[name]
	if m == nil {
		c.errorPage(w, r, http.StatusNotFound, "No such member",
			fmt.Sprintf("The formation %s has no member %q; its members are %s.", c.cfg.Roster.Formation, cut(name, 64), strings.Join(c.names(), ", ")))
		return
	}
	if !taskIDForm.MatchString(id) {
		c.errorPage(w, r, http.StatusBadRequest, "Not a task id", fmt.Sprintf("%q is not a task id: a task id looks like tsk_01… (letters, digits, _ and -).", cut(id, 64)))
		return
	}
	v := c.taskView(r.Context(), m, id)
	if v.Unknown && !v.HasRecs {
		c.errorPage(w, r, http.StatusNotFound, "Unknown task",
			fmt.Sprintf("Member %s has no task %s (its door says: %s), and the records mention none. It may have been removed by the store's retention, or the id was mistyped.", name, id, v.DoorErr))
		return
	}
	c.renderPage(w, r, http.StatusOK, "task", c.newPage(s, "Task "+id, name, v))
}

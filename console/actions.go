package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/oklog/ulid/v2"
)

// The console's writes to members' doors, one handler per form: send a task, answer a waiting task,
// cancel a task. Each gives the door twenty seconds, tells the pages watching, and sends the browser to
// the task's page; a refusal is an error page that quotes the door.

// newMessageID is the id of a message the console sends.
func newMessageID() a2a.MessageID {
	return a2a.MessageID("msg_" + strings.ToLower(ulid.Make().String()))
}

// send is SendMessage with returnImmediately; the browser goes to the task's page to watch it.
func (c *Console) send(w http.ResponseWriter, r *http.Request, _ *loginSession) {
	name := r.PostFormValue("member")
	text := strings.TrimSpace(r.PostFormValue("text"))
	m := c.byName[name]
	switch {
	case m == nil:
		c.errorPage(w, r, http.StatusBadRequest, "No such member", fmt.Sprintf("Nothing was sent: the formation has no member %q; its members are %s.", cut(name, 64), strings.Join(c.names(), ", ")))
		return
	case text == "":
		c.errorPage(w, r, http.StatusBadRequest, "Nothing to send", "Nothing was sent: the message is empty. Write the task's text and send again.")
		return
	}
	msg := &a2a.Message{MessageID: newMessageID(), Role: a2a.RoleUser,
		Parts: []a2a.Part{a2a.TextPart(text)}, ContextID: strings.TrimSpace(r.PostFormValue("context"))}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	res, err := m.client.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg, Configuration: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		c.errorPage(w, r, http.StatusBadGateway, "The message was not accepted", fmt.Sprintf("Member %s's door (%s) did not take the message: %s", name, m.URL, describeDoorError(err)))
		return
	}
	if res.Task == nil {
		c.errorPage(w, r, http.StatusBadGateway, "No task", fmt.Sprintf("Member %s answered with a message, not a task: %s", name, res.Message.Text()))
		return
	}
	row := rowOf(name, res.Task)
	m.mu.Lock()
	if _, ok := m.tasks[row.ID]; !ok {
		m.tasks[row.ID] = &row
	}
	m.mu.Unlock()
	if !row.State.Terminal() {
		c.follow(m, row.ID) // the task's page then changes as the door streams the task
	}
	c.hub.publish(Event{Kind: "task", Member: name, Task: row.ID})
	http.Redirect(w, r, "/members/"+name+"/tasks/"+row.ID, http.StatusSeeOther)
}

// answer sends a follow-up to a task that waits for input: an approval's decision (allow or deny, with
// an optional reason) as a data part, or the answer to a question as text.
func (c *Console) answer(w http.ResponseWriter, r *http.Request, _ *loginSession) {
	name, id := r.PostFormValue("member"), r.PostFormValue("task")
	decision, text := r.PostFormValue("decision"), strings.TrimSpace(r.PostFormValue("text"))
	m := c.byName[name]
	var part a2a.Part
	switch {
	case m == nil || !taskIDForm.MatchString(id):
		c.errorPage(w, r, http.StatusBadRequest, "Nothing to answer", fmt.Sprintf("Nothing was sent: member %q and task %q do not name a task of this formation.", cut(name, 64), cut(id, 64)))
		return
	case decision == "allow" || decision == "deny":
		b, _ := json.Marshal(map[string]string{"decision": decision, "reason": strings.TrimSpace(r.PostFormValue("reason"))})
		part = a2a.Part{Data: b, MediaType: "application/json"}
	case decision != "":
		c.errorPage(w, r, http.StatusBadRequest, "Not a decision", fmt.Sprintf("Nothing was sent: %q is not a decision; approve (allow) or deny.", cut(decision, 64)))
		return
	case text == "":
		c.errorPage(w, r, http.StatusBadRequest, "Nothing to send", "Nothing was sent: the answer is empty. Write the answer to the task's question and send again.")
		return
	default:
		part = a2a.TextPart(text)
	}
	msg := &a2a.Message{MessageID: newMessageID(), Role: a2a.RoleUser, Parts: []a2a.Part{part}, TaskID: a2a.TaskID(id)}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	if _, err := m.client.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg, Configuration: &a2a.SendMessageConfig{ReturnImmediately: true}}); err != nil {
		c.errorPage(w, r, http.StatusConflict, "The answer was not taken", fmt.Sprintf("Member %s's door refused the answer to %s: %s", name, id, describeDoorError(err)))
		return
	}
	c.follow(m, id) // mostly followed already: a stream stays open while its task waits for input
	c.hub.publish(Event{Kind: "task", Member: name, Task: id})
	http.Redirect(w, r, "/members/"+name+"/tasks/"+id, http.StatusSeeOther)
}

// cancel asks a task's door to cancel it (CancelTask).
func (c *Console) cancel(w http.ResponseWriter, r *http.Request, _ *loginSession) {
	name, id := r.PostFormValue("member"), r.PostFormValue("task")
	m := c.byName[name]
	if m == nil || !taskIDForm.MatchString(id) {
		c.errorPage(w, r, http.StatusBadRequest, "Nothing to cancel", fmt.Sprintf("Nothing was canceled: member %q and task %q do not name a task of this formation.", cut(name, 64), cut(id, 64)))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	if _, err := m.client.CancelTask(ctx, &a2a.CancelTaskRequest{ID: a2a.TaskID(id)}); err != nil {
		c.errorPage(w, r, http.StatusConflict, "The task was not canceled", fmt.Sprintf("Member %s's door refused to cancel %s: %s", name, id, describeDoorError(err)))
		return
	}
	c.hub.publish(Event{Kind: "task", Member: name, Task: id})
	http.Redirect(w, r, "/members/"+name+"/tasks/"+id, http.StatusSeeOther)
}

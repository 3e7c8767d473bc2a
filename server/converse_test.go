package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/peercred"
)

// scriptAgent is an agent capsule on the script driver, with extra lines of murmur.yaml.
func scriptAgent(extra string) string {
	return "name: talker\ninference:\n  driver: local\n  choices:\n    local: {driver: script, script: script.yaml}\n" + extra
}

// send is a blocking SendMessage of msg whose result must be a task.
func send(t *testing.T, c *a2aclient.Client, msg *a2ago.Message) *a2ago.Task {
	t.Helper()
	res, err := c.SendMessage(context.Background(), &a2ago.SendMessageRequest{Message: msg})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2ago.Task)
	if !ok {
		t.Fatalf("SendMessage answered %T, want a task", res)
	}
	return task
}

// followUp is a message naming task.
func followUp(task a2ago.TaskID, parts ...*a2ago.Part) *a2ago.Message {
	m := a2ago.NewMessage(a2ago.MessageRoleUser, parts...)
	m.TaskID = task
	return m
}

// inContext is a user message in an existing context.
func inContext(contextID, text string) *a2ago.Message {
	m := userMessage(text)
	m.ContextID = contextID
	return m
}

// TestConversationInContext: a second task in a context sees the first (its message and answer); the
// context is its sender's own: another sender naming it is refused; one that does not exist starts anew.
func TestConversationInContext(t *testing.T) {
	f := startDoor(t, map[string]string{
		"murmur.yaml": scriptAgent(""),
		"script.yaml": "rules:\n" +
			"  - match: '^price of (?P<what>\\w+)$'\n    turns:\n      - say: '{{.what}} costs 12 dollars'\n" +
			"  - match: ''\n    turns:\n      - say: 'I was told: {{.transcript}}'\n",
	})
	c := f.client(testOperatorToken)
	first := send(t, c, userMessage("price of tea"))
	if got := responseText(first); got != "tea costs 12 dollars" {
		t.Fatalf("first answer %q", got)
	}
	second := send(t, c, inContext(first.ContextID, "and in euros?"))
	if second.ContextID != first.ContextID || second.Status.State != a2ago.TaskStateCompleted {
		t.Fatalf("second task %s in context %s, want completed in %s", second.Status.State, second.ContextID, first.ContextID)
	}
	got := responseText(second)
	for _, want := range []string{"user:\nprice of tea", "assistant:\ntea costs 12 dollars", "user:\nand in euros?"} {
		if !strings.Contains(got, want) {
			t.Errorf("the second task's conversation lacks %q:\n%s", want, got)
		}
	}
	// A new message without contextId starts from nothing.
	if fresh := responseText(send(t, c, userMessage("and in euros?"))); strings.Contains(fresh, "tea") {
		t.Errorf("a task in a new context saw another context: %q", fresh)
	}

	peer := f.client(peerToken("caller", peercred.Trusted))
	ctx := context.Background()
	_, err := peer.SendMessage(ctx, &a2ago.SendMessageRequest{Message: inContext(first.ContextID, "what did they ask?")})
	if !errors.Is(err, a2ago.ErrInvalidParams) || !strings.Contains(err.Error(), "context "+first.ContextID+" is not one of your conversations") {
		t.Errorf("another sender in the operator's context: %v, want invalid params saying it is not theirs", err)
	}
	page, err := peer.ListTasks(ctx, &a2ago.ListTasksRequest{ContextID: first.ContextID})
	if err != nil || len(page.Tasks) != 0 {
		t.Errorf("the peer lists %d tasks of the operator's context (%v), want none", len(page.Tasks), err)
	}
	// The peer's own conversation is the peer's: it continues it, the operator may not join it.
	theirs := send(t, peer, userMessage("price of coffee"))
	if got := responseText(send(t, peer, inContext(theirs.ContextID, "and in euros?"))); !strings.Contains(got, "coffee costs 12 dollars") || strings.Contains(got, "tea") {
		t.Errorf("the peer's second task saw %q", got)
	}
	_, err = c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: inContext(theirs.ContextID, "me too")})
	if !errors.Is(err, a2ago.ErrInvalidParams) || !strings.Contains(err.Error(), "leave it out to start a new conversation") {
		t.Errorf("the operator in a peer's context: %v, want it refused saying what to do", err)
	}
	// A contextId no task has starts a new conversation under it (TestClientChosenContext).
	if fresh := send(t, c, inContext("ctx_nosuch", "hello")); fresh.ContextID != "ctx_nosuch" || strings.Contains(responseText(fresh), "tea") {
		t.Errorf("an unknown context: task in %q answering %q, want a new conversation under ctx_nosuch", fresh.ContextID, responseText(fresh))
	}
}

// approvalFiles is an agent that calls session-status once and answers with the result, behind an
// on-tool-call hook that asks the sender to approve every session-status call.
func approvalFiles(extra string) map[string]string {
	d := ".murmur/store/local/approve/1.0.0/"
	return map[string]string{
		"murmur.yaml": scriptAgent("hooks: [local/approve]\n" + extra),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n      - call: [{tool: session-status}]\n" +
			"      - say: '{{range .results}}{{.status}}: {{.output}}{{end}}'\n",
		d + "murmur.yaml": "name: local/approve\nversion: 1.0.0\nruntime: hook\nimplementation: command\ncommand: [./hook.sh]\nevents: [on-tool-call]\n",
		d + "hook.sh":     "#!/bin/sh\nif grep -q session-status; then echo '{\"decision\":\"ask\",\"question\":\"May I read the session status?\",\"reason\":\"status reads are watched\"}'; else echo '{\"decision\":\"allow\"}'; fi\n",
	}
}

// TestApprovalFlow: an on-tool-call hook asks; the task waits in TASK_STATE_INPUT_REQUIRED with the
// question, the tool and its input; a follow-up that neither approves nor denies is refused and the
// task keeps waiting; "approve" runs the tool and the task completes; a data part denying refuses the
// call with the sender's reason and the task goes on; a waiting task can be canceled.
func TestApprovalFlow(t *testing.T) {
	f := startDoor(t, approvalFiles(""))
	c := f.client(testOperatorToken)
	ctx := context.Background()

	task := send(t, c, userMessage("check"))
	if task.Status.State != a2ago.TaskStateInputRequired {
		t.Fatalf("task %s %q, want input-required", task.Status.State, statusText(task))
	}
	q := statusText(task)
	for _, want := range []string{"May I read the session status?", "The tool session-status is to be called with {}", `"approve" or "deny"`, string(task.ID)} {
		if !strings.Contains(q, want) {
			t.Errorf("the question lacks %q:\n%s", want, q)
		}
	}
	var data map[string]any
	for _, p := range task.Status.Message.Parts {
		if d, ok := p.Data().(map[string]any); ok {
			data = d
		}
	}
	if data["tool"] != "session-status" || data["question"] != "May I read the session status?" || data["hook"] != "local/approve" {
		t.Errorf("the status message's data part: %v", data)
	}

	for _, bad := range []struct {
		part *a2ago.Part
		want string
	}{
		{a2ago.NewTextPart("maybe later"), `the message "maybe later" neither approves nor denies`},
		{a2ago.NewDataPart(map[string]any{"decision": "perhaps"}), `decides "perhaps", which is neither "allow" nor "deny"`},
	} {
		_, err := c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: followUp(task.ID, bad.part)})
		if !errors.Is(err, a2ago.ErrInvalidParams) || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), `a text starting with "approve" or "deny"`) {
			t.Errorf("follow-up %v: %v, want invalid params with %q and what is expected", bad.part, err, bad.want)
		}
	}
	if still := f.waitState(c, task.ID, a2ago.TaskStateInputRequired); len(still.History) != 1 {
		t.Errorf("a refused follow-up entered the history: %d messages", len(still.History))
	}

	done := send(t, c, followUp(task.ID, a2ago.NewTextPart("Approve: fine by me")))
	if done.Status.State != a2ago.TaskStateCompleted || !strings.HasPrefix(responseText(done), "ok: {") {
		t.Errorf("approved task %s, answer %q; want completed with the tool's output", done.Status.State, responseText(done))
	}
	if len(done.History) < 2 || done.History[1].Parts[0].Text() != "Approve: fine by me" {
		t.Errorf("the approval is not in the task's history: %+v", done.History)
	}
	asked := records(t, f.session.RecordsDir(), "input_required")
	got := records(t, f.session.RecordsDir(), "input_received")
	if len(asked) != 1 || asked[0]["tool"] != "session-status" || asked[0]["hook"] != "local/approve" || asked[0]["task"] != string(task.ID) {
		t.Errorf("input_required records %v", asked)
	}
	if len(got) != 1 || got[0]["decision"] != "allow" || got[0]["reason"] != "fine by me" {
		t.Errorf("input_received records %v", got)
	}
	_, err := c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: followUp(task.ID, a2ago.NewTextPart("approve"))})
	if !errors.Is(err, a2ago.ErrUnsupportedOperation) || !strings.Contains(err.Error(), "without taskId to continue the conversation") {
		t.Errorf("an approval for a completed task: %v, want unsupported operation saying what to do", err)
	}

	denied := send(t, c, userMessage("check again"))
	done = send(t, c, followUp(denied.ID, a2ago.NewDataPart(map[string]any{"decision": "deny", "reason": "not today"})))
	if want := "refused: denied by the task's sender, asked by policy local/approve: not today"; done.Status.State != a2ago.TaskStateCompleted || !strings.HasPrefix(responseText(done), want) {
		t.Errorf("denied task %s, answer %q; want completed with %q", done.Status.State, responseText(done), want)
	}

	waiting := send(t, c, userMessage("check once more"))
	canceled, err := c.CancelTask(ctx, &a2ago.CancelTaskRequest{ID: waiting.ID})
	if err != nil || canceled.Status.State != a2ago.TaskStateCanceled {
		t.Fatalf("cancel of a waiting task: %v, %+v", err, canceled)
	}
	_, err = c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: followUp(waiting.ID, a2ago.NewTextPart("approve"))})
	if !errors.Is(err, a2ago.ErrUnsupportedOperation) {
		t.Errorf("an approval for a canceled task: %v", err)
	}
	// The waiting task is the sender's: another principal cannot see it, let alone approve it.
	other := send(t, c, userMessage("check for the peer"))
	peer := f.client(peerToken("caller", peercred.Trusted))
	_, err = peer.SendMessage(ctx, &a2ago.SendMessageRequest{Message: followUp(other.ID, a2ago.NewTextPart("approve"))})
	if !errors.Is(err, a2ago.ErrTaskNotFound) {
		t.Errorf("a peer approving the operator's task: %v, want task not found", err)
	}
	c.CancelTask(ctx, &a2ago.CancelTaskRequest{ID: other.ID})
}

// TestInputWaitTimesOut: a task nobody answers fails once lifecycle.input_wait_secs has passed, saying so.
func TestInputWaitTimesOut(t *testing.T) {
	f := startDoor(t, map[string]string{
		"murmur.yaml": scriptAgent("lifecycle: {input_wait_secs: 1}\n"),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n      - ask: 'Which currency?'\n      - say: 'in {{.message}}'\n",
	})
	c := f.client(testOperatorToken)
	task := send(t, c, userMessage("convert 12 dollars"))
	if task.Status.State != a2ago.TaskStateInputRequired || !strings.HasPrefix(statusText(task), "Which currency?") {
		t.Fatalf("task %s %q, want input-required asking the currency", task.Status.State, statusText(task))
	}
	failed := f.waitState(c, task.ID, a2ago.TaskStateFailed)
	if want := "the task waited 1 second(s) for its sender's input (lifecycle.input_wait_secs) and got none"; statusText(failed) != want {
		t.Errorf("timed-out task says %q, want %q", statusText(failed), want)
	}
}

// TestAskTurnAndWorkingFollowUp: the script driver's ask: turn asks the sender and its answer enters the
// conversation; a follow-up to a task that is working is refused, saying to wait or cancel.
func TestAskTurnAndWorkingFollowUp(t *testing.T) {
	f := startDoor(t, map[string]string{
		"murmur.yaml": scriptAgent(""),
		"script.yaml": "rules:\n  - match: ''\n    turns:\n      - ask: 'Which currency?'\n      - say: 'converted to {{.message}}'\n",
	})
	c := f.client(testOperatorToken)
	task := send(t, c, userMessage("convert 12 dollars"))
	done := send(t, c, followUp(task.ID, a2ago.NewTextPart("euros")))
	if done.Status.State != a2ago.TaskStateCompleted || responseText(done) != "converted to euros" {
		t.Errorf("task %s, answer %q; want converted to euros", done.Status.State, responseText(done))
	}
	if got := records(t, f.session.RecordsDir(), "input_received"); len(got) != 1 || got[0]["answer"] != "euros" {
		t.Errorf("input_received %v", got)
	}

	g := startDoor(t, map[string]string{"murmur.yaml": gatedScript})
	gc := g.client(testOperatorToken)
	res, err := gc.SendMessage(context.Background(), &a2ago.SendMessageRequest{Message: userMessage("slow"),
		Config: &a2ago.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	working := g.waitState(gc, res.(*a2ago.Task).ID, a2ago.TaskStateWorking)
	_, err = gc.SendMessage(context.Background(), &a2ago.SendMessageRequest{Message: followUp(working.ID, a2ago.NewTextPart("hurry"))})
	if !errors.Is(err, a2ago.ErrUnsupportedOperation) || !strings.Contains(err.Error(), "wait for it (GetTask or SubscribeToTask), cancel it (CancelTask)") {
		t.Errorf("a follow-up to a working task: %v, want unsupported operation saying to wait or cancel", err)
	}
	g.release()
	g.waitState(gc, working.ID, a2ago.TaskStateCompleted)
}

// TestInputRequiredStreams: a stream shows the input-required state and, once a follow-up answers,
// goes on to the task's end.
func TestInputRequiredStreams(t *testing.T) {
	f := startDoor(t, approvalFiles(""))
	c := f.client(testOperatorToken)
	ctx := context.Background()
	st := collect(c.SendStreamingMessage(ctx, &a2ago.SendMessageRequest{Message: userMessage("check")}))
	lines := st.until(t, "status TASK_STATE_INPUT_REQUIRED")
	if last := lines[len(lines)-1]; !strings.Contains(last, "May I read the session status?") {
		t.Errorf("the input-required event %q lacks the question", last)
	}
	page, err := c.ListTasks(ctx, &a2ago.ListTasksRequest{})
	if err != nil || len(page.Tasks) != 1 {
		t.Fatalf("ListTasks: %v %v", page, err)
	}
	// The follow-up comes as a stream of its own: it starts with the task working again, and both streams
	// end with the task completed.
	follow := collect(c.SendStreamingMessage(ctx, &a2ago.SendMessageRequest{Message: followUp(page.Tasks[0].ID, a2ago.NewTextPart("approve"))}))
	for name, s := range map[string]*collector{"first": st, "follow-up": follow} {
		rest, err := s.rest(t)
		// (The follow-up's stream may open on the task already completed: then its one event is the task.)
		if err != nil || len(rest) == 0 || !strings.Contains(rest[len(rest)-1], "TASK_STATE_COMPLETED ok: ") {
			t.Errorf("after the approval the %s stream showed %q (%v), want it to end completed", name, rest, err)
		}
	}
}

// TestAnswersBeyondText: files a task writes under out/artifacts/ become file parts: a small one inline,
// a large one by a URL on the door that only the task's sender may read, a symlink out of the workdir
// refused; files from before the task are not its.
func TestAnswersBeyondText(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": "name: files\nscript:\n  command: [sh, -c, '" +
		`read -r what; mkdir -p out/artifacts; if [ "$what" = old ]; then echo old > out/artifacts/old.txt; echo kept; exit 0; fi; ` +
		`printf "hello, file" > out/artifacts/note.txt; head -c 300000 /dev/zero > out/artifacts/big.bin; ln -sf /etc/hostname out/artifacts/escape.txt; echo made` + "']\n"})
	c := f.client(testOperatorToken)
	send(t, c, userMessage("old"))
	task := send(t, c, userMessage("new"))
	if task.Status.State != a2ago.TaskStateCompleted {
		t.Fatalf("task %s %q", task.Status.State, statusText(task))
	}
	arts := map[string]*a2ago.Artifact{}
	for _, a := range task.Artifacts {
		arts[a.Name] = a
	}
	if _, ok := arts["old.txt"]; ok {
		t.Errorf("a file the earlier task wrote is an artifact of this one")
	}
	note := arts["note.txt"]
	if note == nil || string(note.Parts[0].Raw()) != "hello, file" || note.Parts[0].MediaType != "text/plain; charset=utf-8" || note.Parts[0].Filename != "note.txt" {
		t.Errorf("note.txt artifact %+v, want its bytes inline as text/plain", note)
	}
	big := arts["big.bin"]
	if big == nil || big.Parts[0].URL() == "" || big.Parts[0].MediaType != "application/octet-stream" {
		t.Fatalf("big.bin artifact %+v, want a URL", big)
	}
	if want := f.url + "/tasks/" + string(task.ID) + "/artifacts/big.bin"; string(big.Parts[0].URL()) != want {
		t.Errorf("big.bin's URL %s, want %s", big.Parts[0].URL(), want)
	}
	if esc := arts["escape.txt"]; esc == nil || !strings.Contains(esc.Parts[0].Text(), "out/artifacts/escape.txt is a symbolic link, and the runtime follows no symbolic link inside the workdir") {
		t.Errorf("escape.txt artifact %+v, want a refusal", esc)
	}
	get := func(token string) (int, int) {
		req, _ := http.NewRequest(http.MethodGet, string(big.Parts[0].URL()), nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, len(b)
	}
	if code, n := get(testOperatorToken); code != http.StatusOK || n != 300000 {
		t.Errorf("the sender reads big.bin: %d, %d bytes", code, n)
	}
	if code, _ := get(peerToken("caller", peercred.Trusted)); code != http.StatusNotFound {
		t.Errorf("another principal reads big.bin: %d, want 404", code)
	}
	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Errorf("nobody reads big.bin: %d, want 401", code)
	}
	http.DefaultClient.CloseIdleConnections()
}

// TestDataAndMessageAnswers: the script driver's data: turn answers with a data part; a capsule with
// answers: message answers a one-turn task with a Message, and a task that used tools with a Task.
func TestDataAndMessageAnswers(t *testing.T) {
	f := startDoor(t, map[string]string{
		"murmur.yaml": scriptAgent("answers: message\n"),
		"script.yaml": "rules:\n" +
			"  - match: '^total'\n    turns:\n      - data: {total: 12, currency: '{{.task}}'}\n" +
			"  - match: '^tools'\n    turns:\n      - call: [{tool: session-status}]\n      - say: used tools\n" +
			"  - match: ''\n    turns:\n      - say: 'hello {{.task}}'\n",
	})
	c := f.client(testOperatorToken)
	ctx := context.Background()
	res, err := c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: userMessage("there")})
	msg, ok := res.(*a2ago.Message)
	if err != nil || !ok || msg.Parts[0].Text() != "hello there" || msg.Role != a2ago.MessageRoleAgent {
		t.Fatalf("a one-turn task under answers: message: %T %+v (%v), want the answer as a Message", res, res, err)
	}
	if task := send(t, c, userMessage("tools please")); responseText(task) != "used tools" {
		t.Errorf("a task with tools: answer %q", responseText(task))
	}
	res, err = c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: userMessage("total EUR")})
	if err != nil {
		t.Fatal(err)
	}
	msg, ok = res.(*a2ago.Message)
	if !ok {
		t.Fatalf("a data answer: %T", res)
	}
	data, _ := msg.Parts[0].Data().(map[string]any)
	if data["total"] != 12.0 || data["currency"] != "total EUR" {
		t.Errorf("the data answer's part %+v", msg.Parts[0])
	}
	task, err := c.GetTask(ctx, &a2ago.GetTaskRequest{ID: a2ago.TaskID(msg.TaskID)})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range task.Artifacts {
		names = append(names, a.Name)
	}
	if strings.Join(names, ",") != "data,response" || responseText(task) != `{"currency":"total EUR","total":12}` {
		t.Errorf("the data task's artifacts %v, response %q", names, responseText(task))
	}
}

// TestInputRequiredPushed: in a formation, push notifications report a task's input-required state and,
// after the follow-up, its end; the large artifact's URL is on the member's own door.
func TestInputRequiredPushed(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "asker"), 0o755)
	os.WriteFile(filepath.Join(root, "roster.yaml"), []byte("formation: f\nmembers:\n  - {name: asker, capsule: ./asker, listen: '127.0.0.1:0'}\n"), 0o644)
	os.WriteFile(filepath.Join(root, "asker", "murmur.yaml"), []byte(scriptAgent("push: {allow: [127.0.0.1]}\nanswers: message\n")), 0o644)
	os.WriteFile(filepath.Join(root, "asker", "script.yaml"), []byte("rules:\n  - match: ''\n    turns:\n      - ask: 'Which currency?'\n      - say: 'in {{.message}}'\n"), 0o644)
	f := pushFormation(t, root, time.Millisecond)
	defer shutdown(t, f)
	hook := newWebhook(t, 0)
	c := a2agoClient(t, f.Members[0].URL, "op")
	ctx := context.Background()
	res, err := c.SendMessage(ctx, &a2ago.SendMessageRequest{Message: userMessage("convert"), Config: &a2ago.SendMessageConfig{
		PushConfig: &a2ago.PushConfig{URL: hook.srv.URL + "/hook"}}})
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2ago.Task)
	if task.Status.State != a2ago.TaskStateInputRequired {
		t.Fatalf("task %s, want input-required", task.Status.State)
	}
	hook.until(t, a2a.TaskStateInputRequired)
	// The task took more than one turn: it is answered as a Task, even under answers: message.
	done := send(t, c, followUp(task.ID, a2ago.NewTextPart("yen")))
	if responseText(done) != "in yen" {
		t.Errorf("answer %q", responseText(done))
	}
	hook.until(t, a2a.TaskStateCompleted)
}

package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	a2ago "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/internal/peercred"
)

// peerToken is the credential the member name presents to the fixture's door for tasks of trust.
func peerToken(name string, trust ids.Trust) string {
	return peercred.NewKey(testFormationToken, "test").Credential(name, trust)
}

// A peer's identity and trust class come from its credential: the task a peer sends carries them, and
// a request whose metadata claims another caller or another class is refused, recorded, and changes
// nothing.
func TestPeerIdentityFromCredential(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": echoAgent})
	ctx := context.Background()

	for _, trust := range []ids.Trust{peercred.Trusted, peercred.Untrusted} {
		res, err := f.client(peerToken("caller", trust)).SendMessage(ctx, &a2ago.SendMessageRequest{Message: userMessage("from a peer")})
		if err != nil {
			t.Fatal(err)
		}
		task := res.(*a2ago.Task)
		want := map[string]any{"member": "solo", "trust": string(trust), "origin": "peer", "caller": "caller"}
		if diff := cmp.Diff(want, withoutUsage(t, task.Metadata)); diff != "" {
			t.Errorf("peer task metadata (-want +got):\n%s", diff)
		}
		if responseText(task) != "echo: from a peer" {
			t.Errorf("peer task answered %q", responseText(task))
		}
	}

	untrusted := f.client(peerToken("caller", peercred.Untrusted))
	for name, claim := range map[string]map[string]any{
		"claims another caller": {"caller": "other", "trust": "untrusted", "origin": "peer"},
		"claims trusted":        {"caller": "caller", "trust": "trusted", "origin": "peer"},
	} {
		msg := userMessage("let me in")
		msg.Metadata = map[string]any{"murmur": claim}
		_, err := untrusted.SendMessage(ctx, &a2ago.SendMessageRequest{Message: msg})
		if !errors.Is(err, a2ago.ErrUnauthorized) || !strings.Contains(err.Error(), "come from its credential") {
			t.Errorf("%s: %v, want unauthorized saying identity comes from the credential", name, err)
		}
	}
	if n := f.taskCount(); n != 2 {
		t.Errorf("%d tasks stored, want the 2 sent with matching claims", n)
	}
	refused := records(t, f.session.RecordsDir(), "peer_refused")
	if len(refused) != 2 {
		t.Fatalf("%d peer_refused records, want 2: %v", len(refused), refused)
	}
	for _, r := range refused {
		if r["caller"] != "caller" || r["trust"] != "untrusted" || r["reason"] != "metadata_mismatch" {
			t.Errorf("peer_refused record %v does not name the credential's caller and trust", r)
		}
	}
}

// The reach rules hold for every method a peer calls, not only SendMessage; a forged credential and the
// bare formation token authenticate nobody.
func TestPeerReachOnEveryMethod(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": echoAgent})
	ctx := context.Background()
	own := sendTask(t, f.client(testOperatorToken), "the operator's", false)

	stranger := f.client(peerToken("stranger", peercred.Trusted))
	for method, call := range map[string]func() error{
		"SendMessage": func() error {
			_, err := stranger.SendMessage(ctx, &a2ago.SendMessageRequest{Message: userMessage("hi")})
			return err
		},
		"GetTask": func() error {
			_, err := stranger.GetTask(ctx, &a2ago.GetTaskRequest{ID: own.ID})
			return err
		},
		"ListTasks": func() error {
			_, err := stranger.ListTasks(ctx, &a2ago.ListTasksRequest{})
			return err
		},
		"CancelTask": func() error {
			_, err := stranger.CancelTask(ctx, &a2ago.CancelTaskRequest{ID: own.ID})
			return err
		},
	} {
		if err := call(); !errors.Is(err, a2ago.ErrUnauthorized) || !strings.Contains(err.Error(), "no reach rule from stranger to solo") {
			t.Errorf("%s by a member the roster does not let reach solo: %v, want unauthorized naming the reach rule", method, err)
		}
	}
	forged := peercred.NewKey("not-the-secret", "test").Credential("caller", peercred.Trusted)
	for _, token := range []string{testFormationToken, forged} {
		status, rep := f.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":%q}}`, own.ID),
			map[string]string{"Authorization": "Bearer " + token})
		if status != http.StatusUnauthorized || rep.Error == nil || rep.Error.Code != -31401 {
			t.Errorf("GetTask with %.12s…: HTTP %d %+v, want 401 -31401", token, status, rep.Error)
		}
	}
}

// A peer may read, list, cancel and continue only the tasks it sent; another's task answers exactly as a
// task that does not exist.
func TestPeerSeesOnlyItsOwnTasks(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": gatedScript})
	ctx := context.Background()
	op := f.client(testOperatorToken)
	caller := f.client(peerToken("caller", peercred.Untrusted))
	other := f.client(peerToken("other", peercred.Untrusted))

	// One queued task each would need a queue; the gated script holds one task at a time, so the
	// operator's task runs and the peers' are sent once it is done.
	opTask := sendTask(t, op, "operator work", true)
	f.waitState(op, opTask.ID, a2ago.TaskStateWorking)

	unknown := a2ago.TaskID("tsk_01kdoesnotexist0000000000")
	for name, c := range map[string]func(id a2ago.TaskID) error{
		"GetTask": func(id a2ago.TaskID) error {
			_, err := caller.GetTask(ctx, &a2ago.GetTaskRequest{ID: id})
			return err
		},
		"CancelTask": func(id a2ago.TaskID) error {
			_, err := caller.CancelTask(ctx, &a2ago.CancelTaskRequest{ID: id})
			return err
		},
		"SendMessage to the task": func(id a2ago.TaskID) error {
			msg := userMessage("more")
			msg.TaskID = id
			_, err := caller.SendMessage(ctx, &a2ago.SendMessageRequest{Message: msg})
			return err
		},
	} {
		if err := c(opTask.ID); !errors.Is(err, a2ago.ErrTaskNotFound) {
			t.Errorf("%s of the operator's task by a peer: %v, want task not found", name, err)
		}
		if err := c(unknown); !errors.Is(err, a2ago.ErrTaskNotFound) {
			t.Errorf("%s of an unknown task: %v, want task not found", name, err)
		}
	}
	// The wire answers are the same but for the id.
	get := func(token string, id a2ago.TaskID) string {
		_, rep := f.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":%q}}`, id),
			map[string]string{"Authorization": "Bearer " + token})
		b, _ := json.Marshal(rep.Error)
		return strings.ReplaceAll(string(b), string(id), "ID")
	}
	if hidden, missing := get(peerToken("caller", "untrusted"), opTask.ID), get(peerToken("caller", "untrusted"), unknown); hidden != missing {
		t.Errorf("another's task answers\n%s\nbut an unknown one\n%s", hidden, missing)
	}
	if got := f.waitState(op, opTask.ID, a2ago.TaskStateWorking); got.Status.State != a2ago.TaskStateWorking {
		t.Fatalf("the peer's cancel reached the operator's task: %s", got.Status.State)
	}
	f.release()
	f.waitState(op, opTask.ID, a2ago.TaskStateCompleted)

	mine := sendTask(t, caller, "caller work", false)
	theirs := sendTask(t, other, "other work", false)
	for _, c := range []struct {
		name   string
		client interface {
			ListTasks(context.Context, *a2ago.ListTasksRequest) (*a2ago.ListTasksResponse, error)
		}
		want []a2ago.TaskID
	}{
		{"caller", caller, []a2ago.TaskID{mine.ID}},
		{"other", other, []a2ago.TaskID{theirs.ID}},
		{"the operator", op, []a2ago.TaskID{theirs.ID, mine.ID, opTask.ID}},
	} {
		page, err := c.client.ListTasks(ctx, &a2ago.ListTasksRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var got []a2ago.TaskID
		for _, task := range page.Tasks {
			got = append(got, task.ID)
		}
		if diff := cmp.Diff(c.want, got); diff != "" || page.TotalSize != len(c.want) {
			t.Errorf("%s lists (-want +got):\n%s(total %d)", c.name, diff, page.TotalSize)
		}
	}
	if _, err := caller.GetTask(ctx, &a2ago.GetTaskRequest{ID: mine.ID}); err != nil {
		t.Errorf("a peer reading its own task: %v", err)
	}
	if _, err := caller.GetTask(ctx, &a2ago.GetTaskRequest{ID: theirs.ID}); !errors.Is(err, a2ago.ErrTaskNotFound) {
		t.Errorf("a peer reading another peer's task: %v, want task not found", err)
	}
}

// A request without a valid token is answered 401 before its body is read: the door answers though the
// client has sent only the headers of a 4 MiB body.
func TestUnauthenticatedBodyNotRead(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": echoAgent})
	for name, auth := range map[string]string{"no token": "", "wrong token": "Authorization: Bearer guess\r\n"} {
		t.Run(name, func(t *testing.T) {
			status, hdr, body := headersOnly(t, f.url, auth, 4<<20)
			if status != http.StatusUnauthorized {
				t.Fatalf("HTTP %d, want 401: %s", status, body)
			}
			if !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate %q", hdr.Get("WWW-Authenticate"))
			}
			var rep rpcReply
			if err := json.Unmarshal([]byte(body), &rep); err != nil || rep.Error == nil || rep.Error.Code != -31401 || string(rep.ID) != "null" {
				t.Errorf("body %s is not the JSON-RPC error -31401 with id null", body)
			}
		})
	}
	// An authenticated request that declares a body beyond the limit is refused unread as well.
	status, _, body := headersOnly(t, f.url, "Authorization: Bearer "+testOperatorToken+"\r\n", 4<<20)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(body, "larger than this door's limit") {
		t.Errorf("oversize declared body: HTTP %d %s", status, body)
	}
}

// headersOnly sends a POST's headers declaring a body of n bytes, and none of the body, and reads the
// answer: a door that tried to read the body would never answer.
func headersOnly(t *testing.T, base, auth string, n int) (int, http.Header, string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(conn, "POST /a2a HTTP/1.1\r\nHost: door\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n", auth, n)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer while the body was unsent: %v", err)
	}
	defer resp.Body.Close()
	b := new(strings.Builder)
	buf := make([]byte, 4096)
	for {
		k, err := resp.Body.Read(buf)
		b.Write(buf[:k])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, resp.Header, b.String()
}

// The door's body budget bounds what it reads at once: while a slow client holds the whole budget, the
// next request is answered 503 with Retry-After instead of being read, and once the slow request is
// done the budget is free again.
func TestBodyBudgetAnswersFull(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": echoAgent})
	f.door.admit = newAdmission(minBodyWeight)
	f.door.admit.wait = 50 * time.Millisecond

	conn, err := net.Dial("tcp", strings.TrimPrefix(f.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /a2a HTTP/1.1\r\nHost: door\r\nContent-Type: application/json\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n{", testOperatorToken, len(validSend))
	// The slow request holds the budget once it is being read; until then the next one may get in.
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, rep := f.post(validSend, nil)
		if status == http.StatusServiceUnavailable {
			if rep.Error == nil || !strings.Contains(rep.Error.Message, "memory budget") {
				t.Errorf("503 without the reason: %+v", rep.Error)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the door never answered 503 while its budget was held")
		}
		time.Sleep(10 * time.Millisecond)
	}
	conn.Write([]byte(validSend[1:]))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the slow request: %v %v", resp, err)
	}
	resp.Body.Close()
	if status, rep := f.post(validSend, nil); status != http.StatusOK || rep.Error != nil {
		t.Errorf("after the slow request: HTTP %d %+v", status, rep.Error)
	}
}

// records returns the records of a type in a session's trace.jsonl.
func records(t *testing.T, dir, typ string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "trace.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil && r["type"] == typ {
			out = append(out, r)
		}
	}
	return out
}

// A message's parts together hold at most MaxMessageBytes, whatever the door's body limit: past it the
// message is refused with invalid params naming message.parts, and nothing is stored.
func TestMessagePartsTotalBounded(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": echoAgent})
	f.door.cfg.MaxBody = 4 << 20 // the default: the fixture's 64 KiB would refuse the body first
	part := `{"text":"` + strings.Repeat("x", MaxMessageBytes/2) + `"}`
	body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[` +
		part + "," + part + `,{"text":"y"}]}}}`
	status, rep := f.post(body, nil)
	if status != http.StatusOK || rep.Error == nil || rep.Error.Code != -32602 {
		t.Fatalf("HTTP %d %+v, want invalid params", status, rep.Error)
	}
	if b, _ := json.Marshal(rep.Error); !strings.Contains(string(b), "message.parts") || !strings.Contains(string(b), "a message may hold at most 1048576") {
		t.Errorf("error %s does not name message.parts and the limit", b)
	}
	if n := f.taskCount(); n != 0 {
		t.Errorf("%d tasks stored, want none", n)
	}
}

// A peer's push-config calls on a task it did not send answer as for a task that does not exist, and
// change nothing: the operator's config is still the only one.
func TestPeerPushConfigsScoped(t *testing.T) {
	root := t.TempDir()
	for p, body := range map[string]string{
		"roster.yaml": "formation: f\nmembers:\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:0'}\n" +
			"  - {name: caller, capsule: ./caller, listen: '127.0.0.1:0'}\nreach:\n  - {from: caller, to: [worker]}\n",
		"worker/murmur.yaml": pushWorker,
		"caller/murmur.yaml": "name: caller\nscript: {command: [cat]}\n",
	} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		os.WriteFile(filepath.Join(root, p), []byte(body), 0o644)
	}
	f := pushFormation(t, root, time.Millisecond)
	defer shutdown(t, f)
	defer os.WriteFile(filepath.Join(root, "worker", "go"), nil, 0o644)
	hook := newWebhook(t, 2)
	ctx := context.Background()
	op := a2agoClient(t, f.Members[0].URL, "op")
	peer := a2agoClient(t, f.Members[0].URL, peercred.NewKey("fm", "f").Credential("caller", peercred.Trusted))
	res, err := op.SendMessage(ctx, &a2ago.SendMessageRequest{Message: userMessage("job"), Config: &a2ago.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2ago.Task)
	cfg, err := op.CreateTaskPushConfig(ctx, &a2ago.PushConfig{TaskID: task.ID, URL: hook.srv.URL + "/hook"})
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"Create": func() error {
			_, err := peer.CreateTaskPushConfig(ctx, &a2ago.PushConfig{TaskID: task.ID, URL: hook.srv.URL + "/peer"})
			return err
		},
		"Get": func() error {
			_, err := peer.GetTaskPushConfig(ctx, &a2ago.GetTaskPushConfigRequest{TaskID: task.ID, ID: cfg.ID})
			return err
		},
		"List": func() error {
			_, err := peer.ListTaskPushConfigs(ctx, &a2ago.ListTaskPushConfigRequest{TaskID: task.ID})
			return err
		},
		"Delete": func() error {
			return peer.DeleteTaskPushConfig(ctx, &a2ago.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: cfg.ID})
		},
	} {
		if err := call(); !errors.Is(err, a2ago.ErrTaskNotFound) {
			t.Errorf("%s of a push config of the operator's task by a peer: %v, want task not found", name, err)
		}
	}
	list, err := op.ListTaskPushConfigs(ctx, &a2ago.ListTaskPushConfigRequest{TaskID: task.ID})
	if err != nil || len(list) != 1 || list[0].ID != cfg.ID {
		t.Errorf("the operator's configs after the peer's tries: %+v %v, want only %s", list, err, cfg.ID)
	}
}

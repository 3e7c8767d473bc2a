package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestApprovalsExample runs the approvals example as docs/conversations.md shows it, on a copy: an approval from
// mur send (the question shown, then --task … approve), a denial from curl's JSON-RPC (a data part),
// an ask: question answered with mur send, and a conversation continued with --context.
func TestApprovalsExample(t *testing.T) {
	root := filepath.Join(t.TempDir(), "approvals")
	copyDir(t, "../../deploy/examples/approvals", root)
	rosterPath := filepath.Join(root, "roster.yaml")
	addr := freeAddr(t)
	b, _ := os.ReadFile(rosterPath)
	os.WriteFile(rosterPath, []byte(strings.Replace(string(b), "127.0.0.1:7401", addr, 1)), 0o644)
	env := envOf(map[string]string{"MUR_RECORDS_DIR": filepath.Join(root, "records"), "HOME": root})
	ctx, stop := runFormation(t, rosterPath, env, time.Minute)
	defer stop()
	door := "http://" + addr
	send := func(args ...string) (string, string, error) {
		var sout, serr bytes.Buffer
		err := run(ctx, append([]string{"send", "--roster", rosterPath, "--wait"}, args...), env, &sout, &serr)
		return sout.String(), serr.String(), err
	}
	taskOf := regexp.MustCompile(`mur send --roster \S+ --task (tsk_\w+) --wait`)

	// An approval from mur send: the question and how to answer it, exit status 3; then approve.
	sout, serr, err := send("status")
	var rep errReported
	if !errors.As(err, &rep) || rep.code != 3 || !strings.Contains(sout, "waits for your input: May clerk read its session status?\n  tool:  session-status\n  input: {}") {
		t.Fatalf("mur send status: %v\nstdout %s\nstderr %s", err, sout, serr)
	}
	m := taskOf.FindStringSubmatch(sout)
	if m == nil || !strings.Contains(sout, "--wait approve   (or: deny REASON)") {
		t.Fatalf("no answer line in %q", sout)
	}
	if sout, serr, err = send("--task", m[1], "approve"); err != nil || !strings.HasPrefix(sout, "ok: {") {
		t.Errorf("mur send --task %s approve: %v\nstdout %s\nstderr %s", m[1], err, sout, serr)
	}

	// A denial as curl sends it: SendMessage, then a follow-up with a decision data part.
	token, _ := os.ReadFile(filepath.Join(root, ".murmur", "operator.token"))
	rpc := func(body string) map[string]any {
		req, _ := http.NewRequest(http.MethodPost, door+"/a2a", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Version", "1.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct {
			Result map[string]any `json:"result"`
			Error  any            `json:"error"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Error != nil {
			t.Fatalf("JSON-RPC %s: %v %v", body, err, r.Error)
		}
		return r.Result["task"].(map[string]any)
	}
	task := rpc(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"status"}]}}}`)
	if task["status"].(map[string]any)["state"] != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("curl's task %v", task)
	}
	task = rpc(`{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"messageId":"m2","role":"ROLE_USER","taskId":"` + task["id"].(string) +
		`","parts":[{"data":{"decision":"deny","reason":"not now"}}]}}}`)
	answer, _ := json.Marshal(task["artifacts"])
	if !strings.Contains(string(answer), "refused: denied by the task's sender, asked by policy local/ask-first: not now") {
		t.Errorf("the denied task's artifacts: %s", answer)
	}
	http.DefaultClient.CloseIdleConnections()

	// An ask: turn answered with mur send.
	sout, _, err = send("convert 12 dollars")
	m = taskOf.FindStringSubmatch(sout)
	if !errors.As(err, &rep) || m == nil || !strings.Contains(sout, "Into which currency shall I convert 12 dollars?") {
		t.Fatalf("mur send convert: %v %q", err, sout)
	}
	if sout, _, err = send("--task", m[1], "euros"); err != nil || strings.TrimSpace(sout) != "Converting 12 dollars into euros." {
		t.Errorf("the answer to the question: %v %q", err, sout)
	}

	// A conversation: the second task sees the first.
	sout, serr, err = send("my name is Ada")
	ctxOf := regexp.MustCompile(`mur send --roster \S+ --wait --context (ctx_\w+) TEXT`).FindStringSubmatch(serr)
	if err != nil || ctxOf == nil {
		t.Fatalf("mur send: %v %q %q", err, sout, serr)
	}
	if sout, _, err = send("--context", ctxOf[1], "what is my name?"); err != nil || !strings.Contains(sout, "user:\nmy name is Ada") {
		t.Errorf("the second task of the conversation: %v\n%s", err, sout)
	}
	leavesGitStatusClean(t, "approvals", root, "records")
}

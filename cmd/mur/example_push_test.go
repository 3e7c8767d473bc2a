package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHelloPushExample runs docs/push.md's walk-through on a copy of the hello example, unedited but for
// its ports: the example's receiver (go run ./deploy/examples/hello/receiver), built and started as a
// program, and a SendMessage carrying a push config to it; the receiver prints each change of the task,
// SUBMITTED first and COMPLETED last, with the config's token.
func TestHelloPushExample(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hello")
	copyDir(t, "../../deploy/examples/hello", dir)
	rosterPath := filepath.Join(dir, "roster.yaml")
	ports := freeAddrs(t, 2)
	lead, worker := ports[0], ports[1]
	b, _ := os.ReadFile(rosterPath)
	os.WriteFile(rosterPath, []byte(strings.NewReplacer("127.0.0.1:7101", lead, "127.0.0.1:7102", worker).Replace(string(b))), 0o644)

	bin := filepath.Join(t.TempDir(), "receiver")
	if out, err := exec.Command("go", "build", "-o", bin, "../../deploy/examples/hello/receiver").CombinedOutput(); err != nil {
		t.Fatalf("building the receiver: %v\n%s", err, out)
	}
	hookAddr := freeAddr(t)
	recv := exec.Command(bin, "-listen", hookAddr)
	stdout, err := recv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := recv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { recv.Process.Kill(); recv.Wait() }()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if first := <-lines; first != "receiving on http://"+hookAddr+"/hook" {
		t.Fatalf("the receiver said %q", first)
	}

	env := envOf(map[string]string{"MUR_RECORDS_DIR": filepath.Join(dir, "records"), "HOME": dir})
	_, stop := runFormation(t, rosterPath, env, time.Minute)
	defer stop()
	token, err := os.ReadFile(filepath.Join(dir, ".murmur", "operator.token"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":8,"method":"SendMessage","params":{"message":{"messageId":"m8","role":"ROLE_USER","parts":[{"text":"ask worker: 4 * 5"}]},` +
		`"configuration":{"returnImmediately":true,"taskPushNotificationConfig":{"url":"http://` + hookAddr + `/hook","token":"my-check"}}}}`
	req, _ := http.NewRequest(http.MethodPost, "http://"+lead+"/a2a", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var answer bytes.Buffer
	answer.ReadFrom(resp.Body)
	resp.Body.Close()
	var res struct {
		Result struct{ Task struct{ ID string } }
		Error  any
	}
	if json.Unmarshal(answer.Bytes(), &res); res.Result.Task.ID == "" {
		t.Fatalf("SendMessage: %s", answer.String())
	}

	var got []string
	deadline := time.After(60 * time.Second)
	for done := false; !done; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the receiver stopped; it printed %q", got)
			}
			got = append(got, l)
			done = strings.Contains(l, "TASK_STATE_COMPLETED")
		case <-deadline:
			t.Fatalf("no COMPLETED within 60s; the receiver printed %q", got)
		}
	}
	prefix := "my-check " + res.Result.Task.ID + " "
	if len(got) < 3 || got[0] != prefix+"TASK_STATE_SUBMITTED" || !strings.HasPrefix(got[1], prefix+"TASK_STATE_WORKING") {
		t.Errorf("the receiver printed %q, want SUBMITTED, WORKING … then COMPLETED, each with the token", got)
	}
	for _, l := range got {
		if !strings.HasPrefix(l, prefix) {
			t.Errorf("a line without the token and task: %q", l)
		}
	}

	// A file answer: worker writes out/artifacts/report.md, which comes back as an artifact of its task
	// beside the printed answer (docs/conversations.md).
	body = `{"jsonrpc":"2.0","id":9,"method":"SendMessage","params":{"message":{"messageId":"m9","role":"ROLE_USER","parts":[{"text":"report all is well"}]}}}`
	req, _ = http.NewRequest(http.MethodPost, "http://"+worker+"/a2a", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	var task struct {
		Result struct {
			Task struct {
				Artifacts []struct {
					Name  string
					Parts []struct {
						Text      string
						Raw       []byte
						MediaType string
						Filename  string
					}
				}
			}
		}
	}
	json.NewDecoder(resp.Body).Decode(&task)
	resp.Body.Close()
	files := map[string]string{}
	for _, a := range task.Result.Task.Artifacts {
		for _, p := range a.Parts {
			files[a.Name] = p.Text + string(p.Raw) + " " + p.MediaType
		}
	}
	if files["response"] != "worker wrote report.md " || files["report.md"] != "# Report\n\nall is well\n text/markdown; charset=utf-8" {
		t.Errorf("worker's report task: artifacts %q, want the answer and report.md", files)
	}
}

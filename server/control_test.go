package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/driver"
)

const controlledAgent = `name: lead
inference:
  driver: local
  choices:
    local: {driver: script, script: local.yaml}
    other: {driver: script, script: other.yaml}
    keyed: {driver: openai, model: m, base_url: http://127.0.0.1:9/v1, credential: env:MUR_TEST_UNSET_KEY}
control:
  agent_settings: [inference.driver]
  tokens: [{id: ops, token_file: ops.token}]
`

func postControl(t *testing.T, url, token, body string) (int, map[string]string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/control", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]string
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestControlSurface: POST /control with a control token switches the driver choice for the next
// inference call, with switch-driver's checks; every other token is turned away; refusals and changes
// are recorded with the token's id, and control_applied at the call that uses the change.
func TestControlSurface(t *testing.T) {
	driver.SkipUnlessModelDrivers(t)
	fx := startFormation(t, map[string]string{
		"roster.yaml":       "formation: f\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:0'}\n  - {name: plain, capsule: ./plain, listen: '127.0.0.1:0'}\n",
		"lead/murmur.yaml":  controlledAgent,
		"lead/local.yaml":   "rules:\n  - match: ''\n    turns:\n      - say: 'local: {{.task}}'\n",
		"lead/other.yaml":   "rules:\n  - match: ''\n    turns:\n      - say: 'other: {{.task}}'\n",
		"lead/ops.token":    "ctl-secret\n",
		"plain/murmur.yaml": "name: plain\nscript: {command: [cat]}\n",
	}, Tokens{Operator: "op", Formation: "fm"})
	url := fx.f.Members[0].URL
	change := `{"setting": "inference.driver", "value": "other"}`
	for _, tc := range []struct {
		token, body string
		status      int
		says        string
	}{
		{"", change, 401, "missing or invalid control token"},
		{"op", change, 401, "the operator and formation tokens do not open the control surface"},
		{"fm", change, 401, "missing or invalid control token"},
		{"ctl-secret", `{"setting": "inference.driver"}`, 400, `the body must be {"setting"`},
		{"ctl-secret", `not json`, 400, `the body must be`},
		{"ctl-secret", `{"setting": "inference.max_turns", "value": "3"}`, 409, `setting "inference.max_turns" may not be changed: control.agent_settings lists inference.driver`},
		{"ctl-secret", `{"setting": "inference.driver", "value": "gpt"}`, 409, `no driver choice named "gpt" is declared; the choices are [local other keyed]; the driver choice is still local`},
		{"ctl-secret", `{"setting": "inference.driver", "value": "keyed"}`, 409, "driver choice keyed cannot be used now"},
	} {
		status, out := postControl(t, url, tc.token, tc.body)
		if status != tc.status || !strings.Contains(out["error"], tc.says) {
			t.Errorf("token %q body %s: %d %q, want %d saying %q", tc.token, tc.body, status, out["error"], tc.status, tc.says)
		}
	}
	if got := answerOf(fx.ask(t, "lead", "one")); got != "local: one" {
		t.Fatalf("before any change the answer is %q", got)
	}
	status, out := postControl(t, url, "ctl-secret", change)
	if status != 200 || out["previous"] != "local" || out["value"] != "other" {
		t.Fatalf("the change: %d %v", status, out)
	}
	if got := answerOf(fx.ask(t, "lead", "two")); got != "other: two" {
		t.Errorf("after the change the answer is %q, want the other choice's", got)
	}
	var refused, changed, applied int
	for _, r := range fx.records(t, "lead") {
		switch r["type"] {
		case "control_refused":
			refused++
			if r["principal"] != "operator" || r["token_id"] != "ops" || r["reason"] == "" {
				t.Errorf("control_refused %v", r)
			}
		case "control_change":
			changed++
			if r["principal"] != "operator" || r["token_id"] != "ops" || r["from"] != "local" || r["value"] != "other" {
				t.Errorf("control_change %v", r)
			}
		case "control_applied":
			applied++
			if r["value"] != "other" || r["task"] == "" {
				t.Errorf("control_applied %v", r)
			}
		}
	}
	if refused != 3 || changed != 1 || applied != 1 {
		t.Errorf("records: %d control_refused (want 3: the unlisted setting and the two refused choices), %d control_change, %d control_applied", refused, changed, applied)
	}
	// A member with no control token has no control surface.
	if status, out := postControl(t, fx.f.Members[1].URL, "ctl-secret", change); status != 404 || !strings.Contains(out["error"], "no control surface") {
		t.Errorf("a member without control tokens: %d %v", status, out)
	}
}

func TestControlTokens(t *testing.T) {
	dir := t.TempDir()
	c := &capsule.Capsule{Control: capsule.Control{Tokens: []capsule.ControlToken{{ID: "ops", TokenFile: dir + "/missing"}}}}
	if _, err := LoadControlTokens(c, "env-tok"); err == nil || !strings.Contains(err.Error(), "control.tokens ops") {
		t.Errorf("a missing token file: %v", err)
	}
	got, err := LoadControlTokens(&capsule.Capsule{}, " env-tok\n")
	if err != nil || len(got) != 1 || got[0] != (ControlToken{ID: EnvControlTokenID, Token: "env-tok"}) {
		t.Errorf("MUR_CONTROL_TOKEN: %v %v", got, err)
	}
}

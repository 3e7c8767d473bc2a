package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/internal/peercred"
	"github.com/murmur-run/murmur/member/store"
)

type rpcReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int64             `json:"code"`
		Message string            `json:"message"`
		Data    []json.RawMessage `json:"data"`
	} `json:"error"`
}

// post sends body to the door as it is, with the given headers, and decodes the JSON-RPC reply.
func (f *fixture) post(body string, headers map[string]string) (int, rpcReply) {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.url+"/a2a", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testOperatorToken)
	for k, v := range headers {
		if v == "<none>" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out rpcReply
	if err := json.Unmarshal(raw, &out); err != nil {
		f.t.Fatalf("reply is not JSON-RPC: %v: %s", err, raw)
	}
	if out.JSONRPC != "2.0" {
		f.t.Errorf("reply jsonrpc %q", out.JSONRPC)
	}
	return resp.StatusCode, out
}

func (f *fixture) taskCount() int {
	f.t.Helper()
	page, err := f.session.List(context.Background(), store.ListQuery{PageSize: 100}, store.OperatorScope())
	if err != nil {
		f.t.Fatal(err)
	}
	return page.Total
}

// forged is a peer credential for caller signed with another formation secret.
var forged = peercred.NewKey("another-secret", "test").Credential("caller", peercred.Trusted)

const validSend = `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`

func TestBadRequestsGetTheirOwnErrors(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": echoAgent})
	big := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"` +
		strings.Repeat("x", 70<<10) + `"}]}}}`
	for _, tc := range []struct {
		name      string
		body      string
		headers   map[string]string
		status    int
		code      int64
		id        string
		msgHas    string
		detailHas string
	}{
		{"malformed JSON", `{"jsonrpc":"2.0","id":1,"method":`, nil, 200, -32700, "null", "not valid JSON", ""},
		{"empty body", ``, nil, 200, -32700, "null", "not valid JSON", ""},
		{"batch", `[` + validSend + `,` + validSend + `]`, nil, 200, -32600, "null", "batch requests are not served", ""},
		{"not an object", `"SendMessage"`, nil, 200, -32600, "null", "must be a JSON object", ""},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"GetTask","params":{"id":"x"}}`, nil, 200, -32600, "null", `"id" must be a string or a number`, ""},
		{"fraction id", `{"jsonrpc":"2.0","id":1.5,"method":"GetTask","params":{"id":"x"}}`, nil, 200, -32600, "null", `"id" 1.5 is not a whole number from 0 to 18446744073709551615: use such a number, or a string`, ""},
		{"negative id", `{"jsonrpc":"2.0","id":-1,"method":"GetTask","params":{"id":"x"}}`, nil, 200, -32600, "null", `"id" -1 is not a whole number`, ""},
		{"no id", `{"jsonrpc":"2.0","method":"GetTask","params":{"id":"x"}}`, nil, 200, -32600, "null", "notifications are not served", ""},
		{"wrong jsonrpc version", `{"jsonrpc":"1.0","id":3,"method":"GetTask","params":{"id":"x"}}`, nil, 200, -32600, "3", `"jsonrpc" must be "2.0"`, ""},
		{"unknown method", `{"jsonrpc":"2.0","id":"a","method":"DoMagic","params":{}}`, nil, 200, -32601, `"a"`, `method "DoMagic" not found`, ""},
		{"missing params", `{"jsonrpc":"2.0","id":4,"method":"GetTask"}`, nil, 200, -32602, "4", "Invalid params", `"field":"params"`},
		{"ill-typed params", `{"jsonrpc":"2.0","id":5,"method":"GetTask","params":{"id":5}}`, nil, 200, -32602, "5", "Invalid params", `"field":"id"`},
		{"missing task id", `{"jsonrpc":"2.0","id":6,"method":"CancelTask","params":{}}`, nil, 200, -32602, "6", "Invalid params", `"fieldViolations":[{"field":"id"`},
		{"message without parts", `{"jsonrpc":"2.0","id":8,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[]}}}`, nil, 200, -32602, "8", "message.parts", `"field":"message.parts"`},
		{"message with bad role", `{"jsonrpc":"2.0","id":9,"method":"SendMessage","params":{"message":{"messageId":"m","role":"user","parts":[{"text":"x"}]}}}`, nil, 200, -32602, "9", "message.role", `"field":"message.role"`},
		{"page size out of range", `{"jsonrpc":"2.0","id":10,"method":"ListTasks","params":{"pageSize":500}}`, nil, 200, -32602, "10", "pageSize", `"field":"pageSize"`},
		{"garbage page token", `{"jsonrpc":"2.0","id":11,"method":"ListTasks","params":{"pageToken":"!!nope"}}`, nil, 200, -32602, "11", "", `"field":"pageToken"`},
		{"text content type", validSend, map[string]string{"Content-Type": "text/plain"}, 200, -32005, "null", `Content-Type "text/plain" is not supported`, "CONTENT_TYPE_NOT_SUPPORTED"},
		{"no content type", validSend, map[string]string{"Content-Type": "<none>"}, 200, -32005, "null", "application/json", ""},
		{"A2A-Version 0.3", validSend, map[string]string{"A2A-Version": "0.3"}, 200, -32009, "7", "A2A-Version 0.3 is not supported: this door speaks A2A 1.0", "VERSION_NOT_SUPPORTED"},
		{"A2A-Version 2.0", validSend, map[string]string{"A2A-Version": "2.0"}, 200, -32009, "7", "speaks A2A 1.0", ""},
		{"0.3 method name", `{"jsonrpc":"2.0","id":12,"method":"message/send","params":{}}`, nil, 200, -32009, "12", "message/send is an A2A 0.3 method: this door speaks A2A 1.0", "VERSION_NOT_SUPPORTED"},
		{"push not declared", `{"jsonrpc":"2.0","id":14,"method":"CreateTaskPushNotificationConfig","params":{}}`, nil, 200, -32003, "14", "push notifications", "PUSH_NOTIFICATION_NOT_SUPPORTED"},
		{"oversize body", big, nil, 413, -32600, "null", "larger than this door's limit of 65536 bytes (64 KiB)", ""},
		{"no token", validSend, map[string]string{"Authorization": "<none>"}, 401, -31401, "null", "missing or invalid bearer token", "UNAUTHENTICATED"},
		{"wrong token", validSend, map[string]string{"Authorization": "Bearer guess"}, 401, -31401, "null", "missing or invalid bearer token", ""},
		{"not bearer", validSend, map[string]string{"Authorization": "Basic " + testOperatorToken}, 401, -31401, "null", "bearer", ""},
		{"the bare formation token", validSend, map[string]string{"Authorization": "Bearer " + testFormationToken}, 401, -31401, "null", "the formation token is not a bearer credential", ""},
		{"a forged peer credential", validSend, map[string]string{"Authorization": "Bearer " + forged}, 401, -31401, "null", "missing or invalid bearer token", ""},
		{"no token and no JSON", `{"jsonrpc":`, map[string]string{"Authorization": "<none>"}, 401, -31401, "null", "missing or invalid bearer token", ""},
		{"long request id", `{"jsonrpc":"2.0","id":"` + strings.Repeat("i", 300) + `","method":"GetTask","params":{"id":"x"}}`, nil, 200, -32600, "null", `"id" is 302 bytes long: a request id may be at most 256 bytes`, ""},
		{"long task id", `{"jsonrpc":"2.0","id":15,"method":"GetTask","params":{"id":"` + strings.Repeat("t", 100<<10/2) + `"}}`, nil, 200, -32001, "15", "", strings.Repeat("t", 256) + "…" + `"}`},
		{"too many parts", `{"jsonrpc":"2.0","id":16,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[` + strings.Repeat(`{"text":"x"},`, 64) + `{"text":"x"}]}}}`, nil, 200, -32602, "16", "", "65 parts: a message may have at most 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, rep := f.post(tc.body, tc.headers)
			if status != tc.status {
				t.Errorf("HTTP %d, want %d", status, tc.status)
			}
			if rep.Error == nil {
				t.Fatalf("no error; result %s", rep.Result)
			}
			if rep.Error.Code != tc.code {
				t.Errorf("code %d (%s), want %d", rep.Error.Code, rep.Error.Message, tc.code)
			}
			if string(rep.ID) != tc.id {
				t.Errorf("id %s, want %s", rep.ID, tc.id)
			}
			if !strings.Contains(rep.Error.Message, tc.msgHas) {
				t.Errorf("message %q does not say %q", rep.Error.Message, tc.msgHas)
			}
			data, _ := json.Marshal(rep.Error.Data)
			if !strings.Contains(string(data), tc.detailHas) {
				t.Errorf("data %s does not hold %q", data, tc.detailHas)
			}
		})
	}
	if n := f.taskCount(); n != 0 {
		t.Errorf("%d tasks exist after only bad requests: a refused request must change nothing", n)
	}
	// The version header is optional (plain curl), and 1.x is served.
	for _, v := range []string{"<none>", "1.0", "1.1"} {
		if _, rep := f.post(validSend, map[string]string{"A2A-Version": v}); rep.Error != nil {
			t.Errorf("A2A-Version %s refused: %+v", v, rep.Error)
		}
	}
	if _, rep := f.post(validSend, map[string]string{"Content-Type": "application/json; charset=utf-8"}); rep.Error != nil {
		t.Errorf("application/json with a charset refused: %+v", rep.Error)
	}
}

func TestTrailingSlashRouteServesJSONRPC(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": echoAgent})
	req, _ := http.NewRequest(http.MethodPost, f.url+"/a2a/", strings.NewReader(validSend))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testOperatorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep rpcReply
	json.NewDecoder(resp.Body).Decode(&rep)
	if rep.Error != nil || !bytes.Contains(rep.Result, []byte(`"TASK_STATE_COMPLETED"`)) {
		t.Errorf("POST /a2a/ answered %+v %s", rep.Error, rep.Result)
	}
}

func TestAgentCard(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": echoAgent})
	resp, err := http.Get(f.url + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "max-age=") {
		t.Errorf("Cache-Control %q has no max-age", cc)
	}
	etag := resp.Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	var card map[string]any
	if err := json.Unmarshal(body, &card); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "description", "version", "capabilities", "supportedInterfaces", "defaultInputModes", "defaultOutputModes", "skills", "securitySchemes"} {
		if _, ok := card[k]; !ok {
			t.Errorf("agent card lacks %s", k)
		}
	}
	if _, ok := card["url"]; ok {
		t.Error("agent card has a top-level url, which A2A 1.0 does not")
	}
	iface := card["supportedInterfaces"].([]any)[0].(map[string]any)
	want := map[string]any{"url": f.url + "/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
	if diff := cmp.Diff(want, iface); diff != "" {
		t.Errorf("supportedInterfaces[0] (-want +got):\n%s", diff)
	}
	req, _ := http.NewRequest(http.MethodGet, f.url+"/.well-known/agent-card.json", nil)
	req.Header.Set("If-None-Match", etag)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match with the ETag: HTTP %d, want 304", resp.StatusCode)
	}
}

func TestHealthReadyMetrics(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": echoAgent})
	f.post(validSend, nil)
	f.post(`{"jsonrpc":"2.0","id":2,"method":"GetTask","params":{"id":"tsk_missing"}}`, nil)
	get := func(path string) (int, string) {
		resp, err := http.Get(f.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz %d", code)
	}
	if code, body := get("/readyz"); code != 200 {
		t.Errorf("/readyz %d %s", code, body)
	}
	_, metrics := get("/metrics")
	for _, want := range []string{
		`mur_tasks_total{member="solo",state="TASK_STATE_COMPLETED"} 1`,
		`mur_tasks_total{member="solo",state="TASK_STATE_REJECTED"} 0`,
		`mur_tasks_active{member="solo"} 0`,
		`mur_door_requests_total{code="ok",member="solo",method="SendMessage"} 1`,
		`mur_door_requests_total{code="-32001",member="solo",method="GetTask"} 1`,
		`mur_task_duration_seconds_count{member="solo",state="TASK_STATE_COMPLETED"} 1`,
		`mur_inference_calls_total{driver="local",member="solo",model="",provider="murmur.script"} 1`,
		`go_goroutines`,
		`process_open_fds`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// A closed session is not ready.
	f.session.Close(context.Background())
	if code, _ := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz after close: %d, want 503", code)
	}
}

func TestSlowClientCannotHoldTheDoor(t *testing.T) {
	srv := NewHTTPServer(http.NotFoundHandler(), nilLogger())
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes <= 0 {
		t.Fatalf("door server without limits: %+v", srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.ReadHeaderTimeout = 200 * time.Millisecond
	go srv.Serve(ln)
	defer srv.Close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("POST /a2a HTTP/1.1\r\nHost: x\r\n")) // and never finish the headers
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err = io.ReadAll(conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the server kept a client that never sent its headers")
	}
}

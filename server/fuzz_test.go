package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member"
	"github.com/murmur-run/murmur/member/store"
)

// The fuzz targets of the door: FuzzDoorRequest throws whole request bodies (and a choice of token,
// Content-Type and A2A-Version) at POST /a2a; FuzzSendMessageParams, FuzzGetTaskParams,
// FuzzListTasksParams and FuzzCancelTaskParams wrap fuzzed params in a valid envelope for their method.
// Every one goes through a real door's HTTP handler, backed by a real session and SQLite store (called
// in process rather than over loopback, so that coverage is the request's alone), and checks
// what a client may rely on whatever it sends: a well-formed JSON-RPC 2.0 response, its id the
// request's own or null, an error code from A2A's table, HTTP 200 (413 for an oversize body, 401
// without a valid token), never a 5xx, never a result without a valid token, and per method what the
// result must hold.
//
// In params, "$TASK" stands for the id of a completed task, "$CANCELED" for a canceled one and
// "$CONTEXT" for the completed task's context, so that inputs reach stored tasks although ids are
// minted fresh in every run.

// fuzzMaxBody is the fuzz door's body limit; a variant byte can pad a request beyond it.
const fuzzMaxBody = 64 << 10

// fuzzDoor is a door, a client for it, and the tasks the placeholders stand for.
type fuzzDoor struct {
	*fixture
	task     a2a.Task // completed
	canceled a2a.TaskID
	nextID   int
}

func newFuzzDoor(f *testing.F) *fuzzDoor {
	f.Helper()
	return newFuzzDoorWith(f, doorOptions{})
}

// newFuzzDoorWith is newFuzzDoor with options for the fixture's door.
func newFuzzDoorWith(f *testing.F, opts doorOptions) *fuzzDoor {
	f.Helper()
	fx := startDoorWith(f, map[string]string{"murmur.yaml": echoAgent}, opts)
	d := &fuzzDoor{fixture: fx}

	ctx := context.Background()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := a2a.NewClient(fx.url+"/a2a", testOperatorToken, &http.Client{Transport: tr, Timeout: 60 * time.Second})
	// A few completed tasks, so that pages of ListTasks fill; the last is $TASK.
	for i := range 3 {
		res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: &a2a.Message{
			MessageID: a2a.MessageID(fmt.Sprint("fuzz-seed-", i)), Role: a2a.RoleUser, Parts: []a2a.Part{a2a.TextPart("seed task")}}})
		if err != nil || res.Task == nil || res.Task.Status.State != a2a.TaskStateCompleted {
			f.Fatalf("the fuzz door's seed task %d: %+v, %v", i, res, err)
		}
		d.task = *res.Task
	}
	// A canceled task, stored as the session stores one; the echo agent finishes too fast to be
	// canceled on purpose.
	d.canceled = "tsk_fuzzcanceled"
	text := "canceled earlier"
	canceled := &a2a.Task{ID: d.canceled, ContextID: "ctx_fuzzcanceled",
		Status: a2a.TaskStatus{State: a2a.TaskStateCanceled, Timestamp: a2a.NewTimestamp(time.Now()),
			Message: &a2a.Message{MessageID: "msg_fuzz", Role: a2a.RoleAgent, Parts: []a2a.Part{a2a.TextPart(member.CanceledMessage)}}},
		History: []a2a.Message{{MessageID: "m0", Role: a2a.RoleUser, Parts: []a2a.Part{{Text: &text}}}}}
	if err := fx.store.Create(ctx, canceled); err != nil {
		f.Fatal(err)
	}
	return d
}

// expand replaces the placeholders in params.
func (d *fuzzDoor) expand(params []byte) []byte {
	params = bytes.ReplaceAll(params, []byte("$TASK"), []byte(d.task.ID))
	params = bytes.ReplaceAll(params, []byte("$CANCELED"), []byte(d.canceled))
	return bytes.ReplaceAll(params, []byte("$CONTEXT"), []byte(d.task.ContextID))
}

// fuzzRequest is one request as the fuzz targets send it.
// fuzzPeer is the peer credential of "caller", whom the fixture's roster lets reach the door.
var fuzzPeer = peerToken("caller", "trusted")

type fuzzRequest struct {
	body        []byte
	token       string // "" sends no Authorization header
	contentType string // "" sends none
	version     *string
}

func (r fuzzRequest) authenticated() bool {
	return r.token == testOperatorToken || r.token == fuzzPeer
}

// variant decodes the variant byte of FuzzDoorRequest: bits 0-1 the token, 2-3 the Content-Type,
// 4-5 the A2A-Version header, bit 6 pads the body beyond the door's limit.
func variant(body []byte, v uint8) fuzzRequest {
	r := fuzzRequest{body: body}
	r.token = [...]string{testOperatorToken, fuzzPeer, "", testFormationToken}[v&3]
	r.contentType = [...]string{"application/json", "application/json; charset=utf-8", "text/plain", ""}[v>>2&3]
	switch v >> 4 & 3 {
	case 1:
		r.version = new(string)
		*r.version = "1.0"
	case 2:
		r.version = new(string)
		*r.version = "0.3"
	case 3:
		r.version = new(string)
	}
	if v&64 != 0 {
		r.body = append(slices.Clip(body), bytes.Repeat([]byte(" "), fuzzMaxBody)...)
	}
	return r
}

// rpcAnswer is a response as the checks read it.
type rpcAnswer struct {
	status int
	raw    []byte
	id     json.RawMessage
	result json.RawMessage // nil when the response is an error
	code   int64
	msg    string
}

// do sends r to the door and checks everything every response must satisfy.
func (d *fuzzDoor) do(t *testing.T, r fuzzRequest) rpcAnswer {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/a2a", bytes.NewReader(r.body))
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if r.version != nil {
		req.Header.Set(a2a.HeaderVersion, *r.version)
	}
	rec := httptest.NewRecorder()
	d.door.ServeHTTP(rec, req)
	resp := rec.Result()
	raw := rec.Body.Bytes()
	a := checkEnvelope(t, r, resp, raw)
	a.status = resp.StatusCode
	return a
}

// allowedCodes are the JSON-RPC error codes a door may answer with: A2A's table and the two of
// authentication.
var allowedCodes = []int64{
	a2a.CodeParseError, a2a.CodeInvalidRequest, a2a.CodeMethodNotFound, a2a.CodeInvalidParams, a2a.CodeInternalError,
	a2a.CodeTaskNotFound, a2a.CodeTaskNotCancelable, a2a.CodePushNotificationUnsupported, a2a.CodeUnsupportedOperation,
	a2a.CodeContentTypeNotSupported, a2a.CodeInvalidAgentResponse, a2a.CodeExtendedCardNotConfigured,
	a2a.CodeExtensionSupportRequired, a2a.CodeVersionNotSupported, a2a.CodeUnauthenticated, a2a.CodeUnauthorized,
}

// checkEnvelope checks the response to r: status, Content-Type, and a JSON-RPC 2.0 response object with
// the request's id (or null) and exactly one of result and error.
func checkEnvelope(t *testing.T, r fuzzRequest, resp *http.Response, raw []byte) rpcAnswer {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\nrequest (%d bytes, token %q, Content-Type %q): %.2000q\nresponse %d: %.2000s",
			fmt.Sprintf(format, args...), len(r.body), r.token, r.contentType, r.body, resp.StatusCode, raw)
	}
	oversize := len(r.body) > fuzzMaxBody
	switch s := resp.StatusCode; {
	case s >= 500:
		fail("HTTP %d: a request must never make the door fail", s)
	case s == http.StatusUnauthorized:
		if r.authenticated() {
			fail("HTTP 401 for a request with a valid token")
		}
	case s == http.StatusRequestEntityTooLarge:
		if !oversize {
			fail("HTTP 413 for a body of %d bytes, within the limit of %d", len(r.body), fuzzMaxBody)
		}
	case s != http.StatusOK:
		fail("HTTP %d: errors go with HTTP 200 (413 for an oversize body, 401 without a token)", s)
	case oversize && r.authenticated() && isJSON(r.contentType):
		fail("HTTP 200 for a body of %d bytes, beyond the limit of %d: want 413", len(r.body), fuzzMaxBody)
	}
	ct := resp.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "text/event-stream") {
		// A streaming method's answer: every event is a JSON-RPC response; the first is checked as one.
		first, _, ok := strings.Cut(strings.TrimPrefix(string(raw), "data: "), "\n\n")
		if !strings.HasPrefix(string(raw), "data: ") || !ok {
			fail("a text/event-stream answer must start with a data: event")
		}
		raw = []byte(first)
	} else if !strings.HasPrefix(ct, "application/json") {
		fail("Content-Type %q, want application/json", ct)
	}
	if !json.Valid(raw) {
		fail("the response is not valid JSON")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		fail("the response is not a JSON object: %v", err)
	}
	for k := range fields {
		if k != "jsonrpc" && k != "id" && k != "result" && k != "error" {
			fail("the response has a member %q beyond jsonrpc, id, result and error", k)
		}
	}
	if string(fields["jsonrpc"]) != `"2.0"` {
		fail(`"jsonrpc" is %s, want "2.0"`, fields["jsonrpc"])
	}
	id, ok := fields["id"]
	if !ok {
		fail(`the response has no "id" (null when the request's cannot be read)`)
	}
	res, hasResult := fields["result"]
	errRaw, hasError := fields["error"]
	if hasResult == hasError {
		fail("a response holds exactly one of result and error")
	}
	a := rpcAnswer{raw: raw, id: id}
	if hasResult {
		if string(res) == "null" {
			fail("the result is null")
		}
		if !r.authenticated() {
			fail("a request without a valid token got a result")
		}
		a.result = res
	} else {
		var e struct {
			Code    *json.Number    `json:"code"`
			Message *string         `json:"message"`
			Data    json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(errRaw, &e); err != nil || e.Code == nil || e.Message == nil {
			fail("the error is not {code, message}: %v", err)
		}
		code, err := strconv.ParseInt(e.Code.String(), 10, 64)
		if err != nil || !slices.Contains(allowedCodes, code) {
			fail("error code %s is none of A2A's", e.Code)
		}
		if *e.Message == "" {
			fail("the error's message is empty")
		}
		if len(e.Data) > 0 && e.Data[0] != '[' {
			fail("error.data is %s, want an array of details", e.Data)
		}
		if resp.StatusCode == http.StatusUnauthorized && code != a2a.CodeUnauthenticated {
			fail("HTTP 401 with error %d, want %d", code, a2a.CodeUnauthenticated)
		}
		if resp.StatusCode == http.StatusRequestEntityTooLarge && code != a2a.CodeInvalidRequest {
			fail("HTTP 413 with error %d, want %d", code, a2a.CodeInvalidRequest)
		}
		a.code, a.msg = code, *e.Message
	}
	if string(id) != "null" {
		want, ok := requestID(r.body)
		if !ok {
			fail("the response's id is %s, but the request has no string or number id: want null", id)
		}
		if !sameID(id, want) {
			fail("the response's id is %s, want the request's %s (or null)", id, want)
		}
	}
	return a
}

// requestID returns the "id" of a request body that is a JSON object whose id is a string or a number.
func requestID(body []byte) (json.RawMessage, bool) {
	var env struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &env) != nil || len(env.ID) == 0 {
		return nil, false
	}
	switch c := env.ID[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9':
		return env.ID, true
	}
	return nil, false
}

// sameID compares two JSON ids as values: strings by their text, numbers by their literal.
func sameID(a, b json.RawMessage) bool {
	var x, y any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return false
	}
	return x == y
}

// envelopeSeeds are requests the door must answer well, good and bad.
var envelopeSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello"}]}}}`,
	`{"jsonrpc":"2.0","id":"a","method":"SendMessage","params":{"message":{"messageId":"m2","role":"ROLE_USER","parts":[{"text":"later"}]},"configuration":{"returnImmediately":true}}}`,
	`{"jsonrpc":"2.0","id":2,"method":"GetTask","params":{"id":"$TASK","historyLength":1}}`,
	`{"jsonrpc":"2.0","id":3,"method":"ListTasks","params":{"status":"TASK_STATE_COMPLETED","pageSize":2}}`,
	`{"jsonrpc":"2.0","id":4,"method":"CancelTask","params":{"id":"$CANCELED"}}`,
	`{"jsonrpc":"2.0","id":9,"method":"ListTasks"}`,
	`{"jsonrpc":"2.0","id":-1.5e3,"method":"tasks/get","params":{}}`,
	`{"jsonrpc":"2.0","id":null,"method":"GetTask","params":{"id":"x"}}`,
	`{"jsonrpc":"1.0","id":5,"method":"GetTask"}`,
	`[{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}]`,
	`{"jsonrpc":"2.0","id":true,"method":"GetTask"}`,
	`{"jsonrpc":"2.0","method":"GetTask","params":{"id":"x"}}`,
	`{"jsonrpc":"2.0","id":6,"method":"","params":null}`,
	`{"jsonrpc":"2.0","id":"\u00e9\ud800","method":"Nope"}`,
	`{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":[1,2]}`,
	`{"jsonrpc":"2.0","id":8,`,
	``,
	`null`,
	`"2.0"`,
}

// FuzzDoorRequest sends whole request bodies, with a variant byte choosing the token, Content-Type,
// A2A-Version and padding beyond the body limit (see variant).
func FuzzDoorRequest(f *testing.F) {
	d := newFuzzDoor(f)
	for i, s := range envelopeSeeds {
		f.Add([]byte(s), uint8(i*5%128))
	}
	f.Fuzz(func(t *testing.T, body []byte, v uint8) {
		r := variant(d.expand(body), v)
		before := -1
		if !r.authenticated() {
			before = d.count(t)
		}
		a := d.do(t, r)
		if !r.authenticated() {
			if a.result != nil {
				t.Fatalf("a request without a valid token got a result: %s", a.raw)
			}
			if after := d.count(t); after != before {
				t.Fatalf("a request without a valid token changed the store: %d tasks, then %d", before, after)
			}
		}
		if a.result != nil {
			d.checkMethodResult(t, r.body, a)
		}
	})
}

// count returns the number of tasks in the door's store, once the rejections of earlier inputs, which
// the store writes later in batches, are all in it (else they could land between two counts).
func (d *fuzzDoor) count(t *testing.T) int {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); d.store.Batched() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the store's batch writer still holds %d tasks after 30 s", d.store.Batched())
		}
	}
	page, err := d.session.List(context.Background(), store.ListQuery{PageSize: 1}, store.OperatorScope())
	if err != nil {
		t.Fatal(err)
	}
	return page.Total
}

// checkMethodResult checks a result against the method and params of the request that got it.
func (d *fuzzDoor) checkMethodResult(t *testing.T, body []byte, a rpcAnswer) {
	t.Helper()
	var req struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("a request that is not a JSON object got a result: %s", a.raw)
	}
	switch a2a.Method(req.Method) {
	case a2a.MethodSendMessage:
		d.checkSendResult(t, req.Params, a)
	case a2a.MethodGetTask:
		checkGetResult(t, req.Params, a)
	case a2a.MethodListTasks:
		checkListResult(t, req.Params, a)
	case a2a.MethodCancelTask:
		checkCancelResult(t, req.Params, a)
	default:
		t.Fatalf("method %q got a result: %s", req.Method, a.raw)
	}
}

// envelope wraps params in a request for method with a fresh id.
func (d *fuzzDoor) envelope(method a2a.Method, params []byte) ([]byte, string) {
	d.nextID++
	id := strconv.Itoa(d.nextID)
	body := append([]byte(`{"jsonrpc":"2.0","id":`+id+`,"method":"`+string(method)+`","params":`), params...)
	return append(body, '}'), id
}

// fuzzParams is the body of the per-method targets: params wrapped in a valid envelope, sent with the
// operator's token or the formation's (a peer's).
func fuzzParams(f *testing.F, method a2a.Method, seeds []string, check func(d *fuzzDoor, t *testing.T, params []byte, a rpcAnswer)) {
	d := newFuzzDoor(f)
	for _, s := range seeds {
		f.Add([]byte(s), false)
	}
	f.Add([]byte(seeds[0]), true)
	f.Fuzz(func(t *testing.T, params []byte, peer bool) {
		params = d.expand(params)
		if a, ok := d.sendParams(t, method, params, peer); ok && a.result != nil {
			check(d, t, params, a)
		}
	})
}

// sendParams wraps params in a valid envelope for method, sends it with the operator's token or a
// peer's, and checks what holds for any params. It reports false when there is nothing more to check:
// an oversize body, or params that broke the JSON around them.
func (d *fuzzDoor) sendParams(t *testing.T, method a2a.Method, params []byte, peer bool) (rpcAnswer, bool) {
	t.Helper()
	body, id := d.envelope(method, params)
	token := testOperatorToken
	if peer {
		token = fuzzPeer
	}
	a := d.do(t, fuzzRequest{body: body, token: token, contentType: "application/json"})
	if len(body) > fuzzMaxBody {
		return a, false
	}
	if string(a.id) != id {
		// The envelope is valid whatever params are, unless they break the JSON around them.
		if json.Valid(body) {
			t.Fatalf("a valid request with id %s was answered with id %s: %s", id, a.id, a.raw)
		}
		if a.code != a2a.CodeParseError {
			t.Fatalf("a body that is not JSON got error %d, want %d: %s", a.code, a2a.CodeParseError, a.raw)
		}
		return a, false
	}
	switch a.code {
	case a2a.CodeInternalError:
		t.Fatalf("params made the door fail internally: %s", a.raw)
	case a2a.CodeParseError, a2a.CodeInvalidRequest, a2a.CodeMethodNotFound:
		t.Fatalf("valid JSON-RPC envelope answered %d: %s", a.code, a.raw)
	}
	return a, true
}

// FuzzSendMessageParams sends fuzzed SendMessage params.
func FuzzSendMessageParams(f *testing.F) {
	fuzzParams(f, a2a.MethodSendMessage, []string{
		`{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hello"}]}}`,
		`{"message":{"messageId":"m2","role":"ROLE_USER","parts":[{"text":"later"}]},"configuration":{"returnImmediately":true,"historyLength":0}}`,
		`{"message":{"messageId":"m3","role":"ROLE_USER","contextId":"$CONTEXT","parts":[{"text":"again"},{"data":{"a":1},"mediaType":"application/json"}]}}`,
		`{"message":{"messageId":"m4","role":"ROLE_USER","taskId":"$TASK","parts":[{"text":"more"}]}}`,
		`{"message":{"messageId":"m5","role":"ROLE_USER","parts":[{"text":"from a peer"}],"metadata":{"murmur":{"caller":"caller","trust":"trusted","call_id":"mcl_1"}}}}`,
		`{"message":{"messageId":"m6","role":"ROLE_USER","parts":[{"raw":"aGk="},{"url":"http://x"}]}}`,
		`{"message":{"messageId":"","role":"user","parts":[]}}`,
		`{"message":null,"configuration":{"historyLength":-1}}`,
	}, (*fuzzDoor).checkSendResult)
}

// FuzzGetTaskParams sends fuzzed GetTask params.
func FuzzGetTaskParams(f *testing.F) {
	fuzzParams(f, a2a.MethodGetTask, []string{
		`{"id":"$TASK"}`,
		`{"id":"$TASK","historyLength":0}`,
		`{"id":"$CANCELED","historyLength":1}`,
		`{"id":"tsk_nope"}`,
		`{"id":""}`,
		`{"id":5}`,
		`{"historyLength":-3}`,
	}, func(_ *fuzzDoor, t *testing.T, params []byte, a rpcAnswer) { checkGetResult(t, params, a) })
}

// FuzzListTasksParams sends fuzzed ListTasks params.
func FuzzListTasksParams(f *testing.F) {
	fuzzParams(f, a2a.MethodListTasks, []string{
		`{}`,
		`{"status":"TASK_STATE_COMPLETED","pageSize":1,"includeArtifacts":true}`,
		`{"pageSize":2,"historyLength":1}`,
		`{"contextId":"$CONTEXT","historyLength":0}`,
		`{"pageSize":2,"pageToken":"AQAAAAAAAAAElqKW0iTyhcY"}`,
		`{"statusTimestampAfter":"2026-01-02T03:04:05.678Z","status":"TASK_STATE_CANCELED"}`,
		`{"pageSize":500}`,
		`{"pageToken":"!!nope","status":"working"}`,
	}, func(_ *fuzzDoor, t *testing.T, params []byte, a rpcAnswer) { checkListResult(t, params, a) })
}

// FuzzCancelTaskParams sends fuzzed CancelTask params.
func FuzzCancelTaskParams(f *testing.F) {
	fuzzParams(f, a2a.MethodCancelTask, []string{
		`{"id":"$CANCELED"}`,
		`{"id":"$TASK","metadata":{"why":"test"}}`,
		`{"id":"tsk_nope"}`,
		`{}`,
		`{"id":["$TASK"]}`,
	}, func(_ *fuzzDoor, t *testing.T, params []byte, a rpcAnswer) { checkCancelResult(t, params, a) })
}

// decodeTask reads a result (or a SendMessage result's task) as a task and checks its shape.
func decodeResultTask(t *testing.T, raw []byte, a rpcAnswer) a2a.Task {
	t.Helper()
	var task a2a.Task
	if err := json.Unmarshal(raw, &task); err != nil {
		t.Fatalf("the result is not a task: %v: %s", err, a.raw)
	}
	if !strings.HasPrefix(string(task.ID), "tsk_") || task.ContextID == "" || !task.Status.State.Valid() {
		t.Fatalf("the result is not a whole task (id, contextId, a valid state): %s", a.raw)
	}
	return task
}

func (d *fuzzDoor) checkSendResult(t *testing.T, params []byte, a rpcAnswer) {
	t.Helper()
	var req a2a.SendMessageRequest
	if err := json.Unmarshal(jsonNames(params), &req); err != nil || req.Message == nil {
		t.Fatalf("params that are no SendMessage request got a result (%v): %s", err, a.raw)
	}
	var res map[string]json.RawMessage
	if err := json.Unmarshal(a.result, &res); err != nil || len(res) != 1 || res["task"] == nil {
		t.Fatalf(`the result is not {"task": ...}: %s`, a.raw)
	}
	task := decodeResultTask(t, res["task"], a)
	if req.Message.ContextID != "" && task.ContextID != req.Message.ContextID {
		t.Fatalf("the task's context is %q, not the message's %q: %s", task.ContextID, req.Message.ContextID, a.raw)
	}
	blocking := req.Configuration == nil || !req.Configuration.ReturnImmediately
	if blocking && !task.Status.State.Terminal() && !task.Status.State.Interrupted() {
		t.Fatalf("a blocking SendMessage returned a task in %s: %s", task.Status.State, a.raw)
	}
	if c := req.Configuration; c != nil && c.HistoryLength != nil && len(task.History) > *c.HistoryLength {
		t.Fatalf("configuration.historyLength %d, but %d messages of history came back", *c.HistoryLength, len(task.History))
	}
	// The door acknowledged the task: it is stored.
	got, err := d.session.Get(context.Background(), task.ID, nil, store.OperatorScope())
	if err != nil {
		t.Fatalf("task %s was acknowledged but is not in the store: %v", task.ID, err)
	}
	if got.ContextID != task.ContextID {
		t.Fatalf("task %s stored with context %q, acknowledged with %q", task.ID, got.ContextID, task.ContextID)
	}
}

func checkGetResult(t *testing.T, params []byte, a rpcAnswer) {
	t.Helper()
	var req a2a.GetTaskRequest
	if err := json.Unmarshal(jsonNames(params), &req); err != nil {
		t.Fatalf("params that are no GetTask request got a result (%v): %s", err, a.raw)
	}
	task := decodeResultTask(t, a.result, a)
	if task.ID != req.ID {
		t.Fatalf("GetTask %q answered task %q", req.ID, task.ID)
	}
	if req.HistoryLength != nil && len(task.History) > *req.HistoryLength {
		t.Fatalf("historyLength %d, but %d messages came back", *req.HistoryLength, len(task.History))
	}
}

func checkListResult(t *testing.T, params []byte, a rpcAnswer) {
	t.Helper()
	var req a2a.ListTasksRequest
	if len(params) == 0 {
		params = []byte("{}") // every ListTasks field is optional, so params may be left out
	}
	if err := json.Unmarshal(jsonNames(params), &req); err != nil {
		t.Fatalf("params that are no ListTasks request got a result (%v): %s", err, a.raw)
	}
	var res a2a.ListTasksResponse
	if err := json.Unmarshal(a.result, &res); err != nil {
		t.Fatalf("the result is not a ListTasks response: %v: %s", err, a.raw)
	}
	size := a2a.DefaultPageSize
	if req.PageSize != nil {
		size = *req.PageSize
	}
	if res.PageSize != size || len(res.Tasks) > size || res.TotalSize < len(res.Tasks) {
		t.Fatalf("pageSize %d: a page of %d tasks, pageSize %d, totalSize %d", size, len(res.Tasks), res.PageSize, res.TotalSize)
	}
	for _, task := range res.Tasks {
		switch {
		case req.Status != "" && task.Status.State != req.Status:
			t.Fatalf("status %s listed a task in %s", req.Status, task.Status.State)
		case req.ContextID != "" && task.ContextID != req.ContextID:
			t.Fatalf("contextId %q listed a task of context %q", req.ContextID, task.ContextID)
		case req.HistoryLength != nil && len(task.History) > *req.HistoryLength:
			t.Fatalf("historyLength %d listed a task with %d messages", *req.HistoryLength, len(task.History))
		case !req.IncludeArtifacts && len(task.Artifacts) > 0:
			t.Fatalf("a task listed with artifacts, which were not asked for")
		case req.StatusTimestampAfter != nil && (task.Status.Timestamp == nil ||
			!task.Status.Timestamp.After(req.StatusTimestampAfter.Time.Truncate(time.Millisecond))):
			t.Fatalf("statusTimestampAfter %v listed a task of %v", req.StatusTimestampAfter, task.Status.Timestamp)
		}
	}
	if res.NextPageToken != "" && len(res.Tasks) != size {
		t.Fatalf("a next page after a page of %d tasks, short of %d", len(res.Tasks), size)
	}
}

func checkCancelResult(t *testing.T, params []byte, a rpcAnswer) {
	t.Helper()
	var req a2a.CancelTaskRequest
	if err := json.Unmarshal(jsonNames(params), &req); err != nil {
		t.Fatalf("params that are no CancelTask request got a result (%v): %s", err, a.raw)
	}
	task := decodeResultTask(t, a.result, a)
	if task.ID != req.ID {
		t.Fatalf("CancelTask %q answered task %q", req.ID, task.ID)
	}
	if task.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask answered a task in %s, want canceled: %s", task.Status.State, a.raw)
	}
}

// jsonNames is params as the door reads them, proto field names spelled as JSON names (a2a.JSONNames),
// so that a checker predicts what the door did with snake_case fields.
func jsonNames(params []byte) []byte {
	out, err := a2a.JSONNames(params)
	if err != nil {
		return params
	}
	return out
}

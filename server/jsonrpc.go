package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/member"
	"github.com/sourcegraph/jsonrpc2"
)

// response is the JSON-RPC response envelope. jsonrpc2.Response cannot say "id": null, which the answers
// to unparseable requests and batches need, so the id is kept raw here; errors are jsonrpc2's own type.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *jsonrpc2.Error `json:"error,omitempty"`
}

var nullID = json.RawMessage("null")

// serveJSONRPC answers one JSON-RPC request. Everything is checked before the session is touched: the
// content type, the body's size and syntax, the envelope, the token, the A2A version, the method and its
// params. Errors are sent with HTTP 200, as A2A's JSON-RPC binding does, except an oversize body (413).
func (d *Door) serveJSONRPC(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	method, id, result, rpcErr, status := d.handle(r)
	code := "ok"
	if rpcErr != nil {
		code = strconv.FormatInt(rpcErr.Code, 10)
	}
	label := method
	if !knownMethod(method) {
		label = "other"
	}
	d.metrics.requests.WithLabelValues(label, code).Inc()
	d.metrics.duration.WithLabelValues(label).Observe(time.Since(start).Seconds())
	if rpcErr != nil {
		d.cfg.Logger.Debug("json-rpc error", "method", method, "code", rpcErr.Code, "message", rpcErr.Message)
	}
	writeResponse(w, status, response{JSONRPC: "2.0", ID: id, Result: result, Error: rpcErr})
}

func writeResponse(w http.ResponseWriter, status int, resp response) {
	if resp.Error != nil {
		resp.Result = nil
	}
	// A result that is already JSON (a stored task) is spliced in as it is.
	if raw, ok := resp.Result.(json.RawMessage); ok {
		out := make([]byte, 0, len(raw)+len(resp.ID)+40)
		out = append(out, `{"jsonrpc":"2.0","id":`...)
		out = append(out, resp.ID...)
		out = append(out, `,"result":`...)
		out = append(out, raw...)
		out = append(out, "}\n"...)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(out)
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(resp); err != nil {
		resp = response{JSONRPC: "2.0", ID: resp.ID, Error: a2a.ToJSONRPC(a2a.ErrInternal)}
		buf.Reset()
		enc.Encode(resp)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

func knownMethod(m string) bool {
	switch a2a.Method(m) {
	case a2a.MethodSendMessage, a2a.MethodSendStreamingMessage, a2a.MethodGetTask, a2a.MethodListTasks,
		a2a.MethodCancelTask, a2a.MethodSubscribeToTask, a2a.MethodCreatePushConfig, a2a.MethodGetPushConfig,
		a2a.MethodListPushConfigs, a2a.MethodDeletePushConfig, a2a.MethodGetExtendedAgentCard:
		return true
	}
	return false
}

// handle decodes, checks and runs one request; it returns the method name, the id to answer with, and
// either a result or an error.
func (d *Door) handle(r *http.Request) (method string, id json.RawMessage, result any, rpcErr *jsonrpc2.Error, status int) {
	status = http.StatusOK
	fail := func(err error) (string, json.RawMessage, any, *jsonrpc2.Error, int) {
		return method, id, nil, a2a.ToJSONRPC(err), status
	}
	id = nullID

	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		return fail(a2a.ErrContentTypeNotSupported.With(fmt.Sprintf(
			"Content-Type %q is not supported: send the JSON-RPC request as application/json", ct)))
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, d.cfg.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			status = http.StatusRequestEntityTooLarge
			return fail(a2a.ErrInvalidRequest.With(fmt.Sprintf(
				"request body is larger than this door's limit of %d bytes (%s); send a smaller message, or start the door with a larger --max-body",
				d.cfg.MaxBody, humanBytes(d.cfg.MaxBody))))
		}
		return fail(a2a.ErrInvalidRequest.With("reading the request body failed: " + err.Error()))
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if !json.Valid(trimmed) {
			return fail(a2a.ErrParse.With("request body is not valid JSON"))
		}
		return fail(a2a.ErrInvalidRequest.With("batch requests are not served: send one JSON-RPC request object per HTTP request; nothing in the batch was run"))
	}
	var envelope struct {
		JSONRPC *string         `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(trimmed, &envelope); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) || len(trimmed) == 0 {
			return fail(a2a.ErrParse.With("request body is not valid JSON: " + syntaxError(trimmed)))
		}
		return fail(a2a.ErrInvalidRequest.With("the request must be a JSON object with jsonrpc, id, method and params"))
	}
	if len(envelope.ID) > 0 && envelope.ID[0] != '"' && envelope.ID[0] != 'n' && (envelope.ID[0] < '0' || envelope.ID[0] > '9') && envelope.ID[0] != '-' {
		return fail(a2a.ErrInvalidRequest.With(`"id" must be a string or a number`))
	}
	var req jsonrpc2.Request
	if err := json.Unmarshal(trimmed, &req); err != nil {
		return fail(a2a.ErrInvalidRequest.With("invalid JSON-RPC request: " + err.Error()))
	}
	if req.Notif || len(envelope.ID) == 0 || string(envelope.ID) == "null" {
		return fail(a2a.ErrInvalidRequest.With(`the request has no "id": notifications are not served; add an id (a string or a number)`))
	}
	id = envelope.ID
	method = req.Method
	if envelope.JSONRPC == nil || *envelope.JSONRPC != "2.0" {
		return fail(a2a.ErrInvalidRequest.With(`"jsonrpc" must be "2.0"`))
	}
	if method == "" {
		return fail(a2a.ErrInvalidRequest.With(`"method" is empty: name an A2A 1.0 method such as SendMessage`))
	}

	principal := d.cfg.Tokens.Authenticate(r)
	if principal == Nobody {
		return fail(a2a.ErrUnauthenticated.With("missing or invalid bearer token: send Authorization: Bearer <operator token>"))
	}
	if vals, present := r.Header[http.CanonicalHeaderKey(a2a.HeaderVersion)]; present {
		v := strings.TrimSpace(strings.Join(vals, ""))
		if v != "1.0" && !strings.HasPrefix(v, "1.") {
			shown := v
			if shown == "" {
				shown = "empty (which means 0.3)"
			}
			return fail(a2a.ErrVersionNotSupported.WithMeta("version", v).With(fmt.Sprintf(
				"A2A-Version %s is not supported: this door speaks A2A 1.0; send A2A-Version: 1.0", shown)))
		}
	}
	if a2a.IsLegacyMethod(method) {
		return fail(a2a.ErrVersionNotSupported.WithMeta("method", method).With(fmt.Sprintf(
			"%s is an A2A 0.3 method: this door speaks A2A 1.0 (SendMessage, GetTask, ListTasks, CancelTask)", method)))
	}
	var params json.RawMessage
	if req.Params != nil {
		params = *req.Params
	}
	res, err := d.call(r.Context(), principal, a2a.Method(method), params)
	if err != nil {
		return fail(err)
	}
	return method, id, res, nil, status
}

// call runs one method.
func (d *Door) call(ctx context.Context, p Principal, method a2a.Method, params json.RawMessage) (any, error) {
	switch method {
	case a2a.MethodSendMessage:
		var req a2a.SendMessageRequest
		if err := decodeParams(params, &req); err != nil {
			return nil, err
		}
		return d.sendMessage(ctx, p, &req)
	case a2a.MethodGetTask:
		var req a2a.GetTaskRequest
		if err := decodeParams(params, &req); err != nil {
			return nil, err
		}
		if req.ID == "" {
			return nil, a2a.InvalidParams(a2a.FieldViolation{Field: "id", Description: "required: the id of the task to read"})
		}
		if err := checkHistoryLength("historyLength", req.HistoryLength); err != nil {
			return nil, err
		}
		if req.HistoryLength == nil {
			body, err := d.cfg.Executor.GetJSON(ctx, req.ID)
			return json.RawMessage(body), err
		}
		return d.cfg.Executor.Get(ctx, req.ID, req.HistoryLength)
	case a2a.MethodListTasks:
		var req a2a.ListTasksRequest
		if err := decodeParams(params, &req); err != nil {
			return nil, err
		}
		return d.listTasks(ctx, &req)
	case a2a.MethodCancelTask:
		var req a2a.CancelTaskRequest
		if err := decodeParams(params, &req); err != nil {
			return nil, err
		}
		if req.ID == "" {
			return nil, a2a.InvalidParams(a2a.FieldViolation{Field: "id", Description: "required: the id of the task to cancel"})
		}
		return d.cfg.Executor.Cancel(ctx, req.ID)
	case a2a.MethodSendStreamingMessage, a2a.MethodSubscribeToTask:
		return nil, a2a.ErrUnsupportedOperation.With(fmt.Sprintf(
			"%s needs streaming, which this door's agent card does not declare; use SendMessage and GetTask", method))
	case a2a.MethodCreatePushConfig, a2a.MethodGetPushConfig, a2a.MethodListPushConfigs, a2a.MethodDeletePushConfig:
		return nil, a2a.ErrPushNotificationNotSupp.With(fmt.Sprintf(
			"%s needs push notifications, which this door's agent card does not declare; poll GetTask instead", method))
	case a2a.MethodGetExtendedAgentCard:
		return nil, a2a.ErrUnsupportedOperation.With(
			"GetExtendedAgentCard needs an extended agent card, which this door's agent card does not declare; read /.well-known/agent-card.json")
	}
	return nil, a2a.ErrMethodNotFound.WithMeta("method", string(method)).With(fmt.Sprintf(
		"method %q not found: this door serves SendMessage, GetTask, ListTasks and CancelTask (A2A 1.0)", method))
}

func (d *Door) sendMessage(ctx context.Context, p Principal, req *a2a.SendMessageRequest) (any, error) {
	if err := validateMessage(req.Message); err != nil {
		return nil, err
	}
	var histLen *int
	blocking := true
	if c := req.Configuration; c != nil {
		blocking = !c.ReturnImmediately
		histLen = c.HistoryLength
		if err := checkHistoryLength("configuration.historyLength", histLen); err != nil {
			return nil, err
		}
	}
	origin, err := d.origin(p, req.Message)
	if err != nil {
		return nil, err
	}
	task, err := d.cfg.Executor.Send(ctx, req.Message, origin)
	if err != nil {
		return nil, err
	}
	if blocking && !task.Status.State.Terminal() {
		if task, err = d.cfg.Executor.Wait(ctx, task.ID); err != nil {
			return nil, err
		}
	}
	member.TrimHistory(task, histLen)
	return a2a.SendMessageResponse{Task: task}, nil
}

// origin derives a task's origin from the principal: the operator's tasks are trusted; a peer's carry
// its caller's trust class, and the caller must be allowed by the roster to reach this member.
func (d *Door) origin(p Principal, msg *a2a.Message) (member.Origin, error) {
	if p == Operator {
		return member.Origin{Trust: member.TrustTrusted, Origin: member.OriginOperator}, nil
	}
	meta, _ := msg.Metadata["murmur"].(map[string]any)
	caller, _ := meta["caller"].(string)
	if caller == "" {
		return member.Origin{}, a2a.ErrUnauthorized.With(
			"a peer's SendMessage must name its caller in message.metadata.murmur.caller")
	}
	if d.cfg.Roster == nil || !d.cfg.Roster.MayCall(caller, d.cfg.Member) {
		return member.Origin{}, a2a.ErrUnauthorized.WithMeta("caller", caller).With(fmt.Sprintf(
			"member %s may not call %s: roster.yaml has no reach rule from %s to %s", caller, d.cfg.Member, caller, d.cfg.Member))
	}
	trust, _ := meta["trust"].(string)
	if trust != member.TrustTrusted {
		trust = member.TrustUntrusted
	}
	o := member.Origin{Trust: trust, Origin: member.OriginPeer, Caller: caller}
	o.CallID, _ = meta["call_id"].(string)
	o.CallerTaskID, _ = meta["caller_task_id"].(string)
	return o, nil
}

func (d *Door) listTasks(ctx context.Context, req *a2a.ListTasksRequest) (any, error) {
	size := a2a.DefaultPageSize
	if req.PageSize != nil {
		size = *req.PageSize
		if size < 1 || size > a2a.MaxPageSize {
			return nil, a2a.InvalidParams(a2a.FieldViolation{Field: "pageSize",
				Description: fmt.Sprintf("%d is out of range: pageSize must be between 1 and %d", size, a2a.MaxPageSize)})
		}
	}
	if req.Status != "" && !req.Status.Valid() {
		return nil, a2a.InvalidParams(a2a.FieldViolation{Field: "status",
			Description: fmt.Sprintf("%q is not a task state: use a name such as TASK_STATE_COMPLETED", req.Status)})
	}
	if err := checkHistoryLength("historyLength", req.HistoryLength); err != nil {
		return nil, err
	}
	q := member.ListQuery{ContextID: req.ContextID, State: req.Status, PageSize: size, PageToken: req.PageToken}
	if req.StatusTimestampAfter != nil {
		q.After = req.StatusTimestampAfter.Time
	}
	page, err := d.cfg.Executor.List(ctx, q)
	if err != nil {
		return nil, err
	}
	out := a2a.ListTasksResponse{Tasks: make([]a2a.Task, 0, len(page.Tasks)), NextPageToken: page.NextPageToken,
		PageSize: size, TotalSize: page.Total}
	for _, t := range page.Tasks {
		member.TrimHistory(t, req.HistoryLength)
		if !req.IncludeArtifacts {
			t.Artifacts = nil
		}
		out.Tasks = append(out.Tasks, *t)
	}
	return out, nil
}

// decodeParams decodes params into v. Unknown fields are ignored, as A2A says; missing params and values
// of the wrong type are invalid params naming the field.
func decodeParams(params json.RawMessage, v any) error {
	if len(params) == 0 || string(params) == "null" {
		return a2a.InvalidParams(a2a.FieldViolation{Field: "params", Description: "required: this method takes a params object"})
	}
	if err := json.Unmarshal(params, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "params"
			}
			return a2a.InvalidParams(a2a.FieldViolation{Field: field,
				Description: fmt.Sprintf("expected %s, got a JSON %s", te.Type, te.Value)})
		}
		return a2a.InvalidParams(a2a.FieldViolation{Field: "params", Description: err.Error()})
	}
	return nil
}

func validateMessage(m *a2a.Message) error {
	var v []a2a.FieldViolation
	if m == nil {
		return a2a.InvalidParams(a2a.FieldViolation{Field: "message", Description: "required: the message to send"})
	}
	if m.MessageID == "" {
		v = append(v, a2a.FieldViolation{Field: "message.messageId", Description: "required: a unique id chosen by the sender"})
	}
	if m.Role != a2a.RoleUser && m.Role != a2a.RoleAgent {
		v = append(v, a2a.FieldViolation{Field: "message.role", Description: fmt.Sprintf("%q is not a role: use ROLE_USER", m.Role)})
	}
	if len(m.Parts) == 0 {
		v = append(v, a2a.FieldViolation{Field: "message.parts", Description: "required: at least one part, such as {\"text\": \"...\"}"})
	}
	hasText := false
	for i, p := range m.Parts {
		n := 0
		if p.Text != nil {
			n++
			hasText = true
		}
		if p.Raw != nil {
			n++
		}
		if p.URL != "" {
			n++
		}
		if p.Data != nil {
			n++
		}
		if n != 1 {
			v = append(v, a2a.FieldViolation{Field: fmt.Sprintf("message.parts[%d]", i),
				Description: "a part holds exactly one of text, raw, url and data"})
		}
	}
	if len(m.Parts) > 0 && !hasText && len(v) == 0 {
		v = append(v, a2a.FieldViolation{Field: "message.parts", Description: "needs a text part: the task is given as text"})
	}
	if len(v) > 0 {
		return a2a.InvalidParams(v...)
	}
	return nil
}

func checkHistoryLength(field string, n *int) error {
	if n != nil && *n < 0 {
		return a2a.InvalidParams(a2a.FieldViolation{Field: field, Description: fmt.Sprintf("%d is negative: use 0 to omit history, or a positive count", *n)})
	}
	return nil
}

func isJSON(ct string) bool {
	if ct == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

func syntaxError(b []byte) string {
	var x any
	err := json.Unmarshal(b, &x)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	}
	if err != nil {
		return err.Error()
	}
	return "empty body"
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

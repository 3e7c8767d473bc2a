package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/murmur-run/murmur/a2a"
	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member"
	"github.com/murmur-run/murmur/member/store"
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

// serveJSONRPC answers one JSON-RPC request. Everything is checked before the session is touched, and
// the token before anything else: nothing of an unauthenticated request's body is read. Then the content
// type, the door's admission of the body (a memory budget shared by the requests being read and run), the
// body's size and syntax, the envelope, the A2A version, the method, the caller's authorisation and the
// params. Errors are sent with HTTP 200, as A2A's JSON-RPC binding does, except a missing or wrong token
// (401, with WWW-Authenticate), an oversize body (413) and a full door (503, with Retry-After).
func (d *Door) serveJSONRPC(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	r, span := d.startRequestSpan(r) // a stream's span ends once the stream does
	defer span.End()
	method, id, result, rpcErr, status := d.handle(r)
	nameRequestSpan(span, method, result, rpcErr)
	switch status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="murmur"`)
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	}
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
	if st, ok := result.(*stream); ok && rpcErr == nil {
		d.serveStream(w, r, id, st)
		return
	}
	if rpcErr != nil && status == http.StatusOK && isStreaming(method) && d.cfg.Events != nil {
		writeStreamError(w, id, rpcErr)
		return
	}
	writeResponse(w, status, response{JSONRPC: "2.0", ID: id, Result: result, Error: rpcErr})
}

func writeResponse(w http.ResponseWriter, status int, resp response) {
	if resp.Error != nil {
		resp.Result = nil
	}
	// A result that is already JSON (a stored task) is spliced in as it is.
	// The pieces go to the response's own buffer: the task is not copied into one of ours first.
	if raw, ok := resp.Result.(json.RawMessage); ok {
		w.Header()["Content-Type"] = jsonContentType
		w.WriteHeader(status)
		io.WriteString(w, `{"jsonrpc":"2.0","id":`)
		w.Write(resp.ID)
		io.WriteString(w, `,"result":`)
		w.Write(raw)
		io.WriteString(w, "}\n")
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
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// jsonContentType is the Content-Type of every JSON-RPC answer, one slice shared by all (net/http only
// reads it), so that setting it allocates nothing.
var jsonContentType = []string{"application/json"}

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

	caller, why := d.auth.authenticate(r)
	if caller.Principal == Nobody {
		status = http.StatusUnauthorized
		d.pacer.pace(r.Context())
		return fail(a2a.ErrUnauthenticated.With(why))
	}
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		return fail(a2a.ErrContentTypeNotSupported.With(fmt.Sprintf(
			"Content-Type %q is not supported: send the JSON-RPC request as application/json", ct)))
	}
	tooBig := func() (string, json.RawMessage, any, *jsonrpc2.Error, int) {
		status = http.StatusRequestEntityTooLarge
		return fail(a2a.ErrInvalidRequest.With(fmt.Sprintf(
			"request body is larger than this door's limit of %d bytes (%s); send a smaller message, or start the door with a larger --max-body",
			d.cfg.MaxBody, humanBytes(d.cfg.MaxBody))))
	}
	if r.ContentLength > d.cfg.MaxBody {
		return tooBig()
	}
	release, err := d.admit.acquire(r.Context(), bodyWeight(r.ContentLength, d.cfg.MaxBody))
	if err != nil {
		status = http.StatusServiceUnavailable
		return fail(a2a.ErrInternal.With(err.Error()))
	}
	defer release()
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, d.cfg.MaxBody))
	if err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			return tooBig()
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
	// One parse: the envelope with its params kept raw, decoded once more only by the method that takes
	// them. (jsonrpc2.Request's own UnmarshalJSON decodes into a map and marshals the params again.)
	var envelope struct {
		JSONRPC *string         `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  json.RawMessage `json:"method"`
		Params  json.RawMessage `json:"params"`
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
	if len(envelope.ID) > 0 && (envelope.ID[0] == '-' || envelope.ID[0] >= '0' && envelope.ID[0] <= '9') {
		// JSON-RPC discourages fractions; sourcegraph/jsonrpc2 keeps a numeric id as an unsigned integer.
		if _, err := strconv.ParseUint(string(envelope.ID), 10, 64); err != nil {
			return fail(a2a.ErrInvalidRequest.With(fmt.Sprintf(`"id" %s is not a whole number from 0 to %d: use such a number, or a string`,
				a2a.CutID(string(envelope.ID)), uint64(math.MaxUint64))))
		}
	}
	if len(envelope.Method) == 0 || envelope.Method[0] != '"' || json.Unmarshal(envelope.Method, &method) != nil {
		return fail(a2a.ErrInvalidRequest.With("invalid JSON-RPC request: missing method field"))
	}
	if len(envelope.ID) == 0 || string(envelope.ID) == "null" {
		return fail(a2a.ErrInvalidRequest.With(`the request has no "id": notifications are not served; add an id (a string or a number)`))
	}
	if len(envelope.ID) > a2a.MaxIDBytes {
		return fail(a2a.ErrInvalidRequest.With(fmt.Sprintf(`"id" is %d bytes long: a request id may be at most %d bytes`, len(envelope.ID), a2a.MaxIDBytes)))
	}
	id = envelope.ID
	if envelope.JSONRPC == nil || *envelope.JSONRPC != "2.0" {
		return fail(a2a.ErrInvalidRequest.With(`"jsonrpc" must be "2.0"`))
	}
	if method == "" {
		return fail(a2a.ErrInvalidRequest.With(`"method" is empty: name an A2A 1.0 method such as SendMessage`))
	}

	// The version comes as the A2A-Version header or, for clients that cannot set headers, as the
	// A2A-Version request parameter of the URL; the header wins when both are sent.
	vals, present := r.Header[http.CanonicalHeaderKey(a2a.HeaderVersion)]
	if !present {
		vals, present = r.URL.Query()[a2a.HeaderVersion]
	}
	if present {
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
			"%s is an A2A 0.3 method: this door speaks A2A 1.0 (SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask, …)", method)))
	}
	ctx := r.Context()
	if a2a.Method(method) == a2a.MethodSubscribeToTask {
		if ctx, err = withLastEventID(ctx, r); err != nil {
			return fail(err)
		}
	}
	res, err := d.call(ctx, caller, a2a.Method(method), envelope.Params, release)
	if err != nil {
		return fail(err)
	}
	return method, id, res, nil, status
}

// call runs one method for caller. A peer may use a method only if the roster lets it reach this member,
// and sees only the tasks it sent. release gives back the request's admission; a method that waits
// (a blocking SendMessage) calls it before it waits.
func (d *Door) call(ctx context.Context, caller Caller, method a2a.Method, params json.RawMessage, release func()) (any, error) {
	scope := store.OperatorScope()
	if caller.Principal == Peer && knownMethod(string(method)) {
		if !d.mayCall(caller.Member) {
			return nil, a2a.ErrUnauthorized.WithMeta("caller", caller.Member).With(fmt.Sprintf(
				"member %s may not call %s: roster.yaml has no reach rule from %s to %s", caller.Member, d.cfg.Member, caller.Member, d.cfg.Member))
		}
		scope = store.PeerScope(caller.Member)
	}
	switch method {
	case a2a.MethodSendMessage:
		var req a2a.SendMessageRequest
		if err := decodeParams(params, &req); err != nil {
			return nil, err
		}
		return d.sendMessage(ctx, caller, &req, release)
	case a2a.MethodGetTask:
		var req a2a.GetTaskRequest
		if err := decodeParams(params, &req); err != nil {
			return nil, err
		}
		noteTaskID(ctx, req.ID)
		if err := checkTaskID("id", req.ID, "the id of the task to read"); err != nil {
			return nil, err
		}
		if err := checkHistoryLength("historyLength", req.HistoryLength); err != nil {
			return nil, err
		}
		if req.HistoryLength == nil {
			body, err := d.cfg.Executor.GetJSON(ctx, req.ID, scope)
			return json.RawMessage(body), err
		}
		return d.cfg.Executor.Get(ctx, req.ID, req.HistoryLength, scope)
	case a2a.MethodListTasks:
		var req a2a.ListTasksRequest
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage("{}") // every ListTasks parameter is optional: none means the defaults
		}
		if err := decodeParams(params, &req); err != nil {
			return nil, err
		}
		return d.listTasks(ctx, &req, scope)
	case a2a.MethodCancelTask:
		var req a2a.CancelTaskRequest
		if err := decodeParams(params, &req); err != nil {
			return nil, err
		}
		noteTaskID(ctx, req.ID)
		if err := checkTaskID("id", req.ID, "the id of the task to cancel"); err != nil {
			return nil, err
		}
		return d.cfg.Executor.Cancel(ctx, req.ID, scope)
	case a2a.MethodSendStreamingMessage, a2a.MethodSubscribeToTask:
		if d.cfg.Events != nil && method == a2a.MethodSendStreamingMessage {
			var req a2a.SendMessageRequest
			if err := decodeParams(params, &req); err != nil {
				return nil, err
			}
			release()
			return d.openStream(caller, func() (*stream, error) { return d.sendStreamingMessage(ctx, caller, &req, scope) })
		}
		if d.cfg.Events != nil {
			var req a2a.SubscribeToTaskRequest
			if err := decodeParams(params, &req); err != nil {
				return nil, err
			}
			release()
			return d.openStream(caller, func() (*stream, error) { return d.subscribeToTask(ctx, &req, scope) })
		}
		return nil, a2a.ErrUnsupportedOperation.With(fmt.Sprintf(
			"%s needs streaming, which this door's agent card does not declare; use SendMessage and GetTask", method))
	case a2a.MethodCreatePushConfig, a2a.MethodGetPushConfig, a2a.MethodListPushConfigs, a2a.MethodDeletePushConfig:
		if d.cfg.Push != nil {
			return d.pushCall(ctx, caller, method, params, scope)
		}
		return nil, a2a.ErrPushNotificationNotSupp.With(fmt.Sprintf(
			"%s needs push notifications, which this door's agent card does not declare; poll GetTask instead", method))
	case a2a.MethodGetExtendedAgentCard:
		return nil, a2a.ErrUnsupportedOperation.With(
			"GetExtendedAgentCard needs an extended agent card, which this door's agent card does not declare; read /.well-known/agent-card.json")
	}
	return nil, a2a.ErrMethodNotFound.WithMeta("method", a2a.CutID(string(method))).With(fmt.Sprintf(
		"method %q not found: this door serves the A2A 1.0 methods: SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask and the four TaskPushNotificationConfig methods", a2a.CutID(string(method))))
}

// checkTaskID refuses a missing id, and answers an id longer than any task id as an unknown task,
// echoing no more than a2a.MaxIDBytes of it.
func checkTaskID(field string, id a2a.TaskID, what string) error {
	switch {
	case id == "":
		return a2a.InvalidParams(a2a.FieldViolation{Field: field, Description: "required: " + what})
	case len(id) > a2a.MaxIDBytes:
		return a2a.ErrTaskNotFound.WithMeta("taskId", a2a.CutID(string(id)))
	}
	return nil
}

// checkSend checks the params of SendMessage and SendStreamingMessage before anything is sent.
func (d *Door) checkSend(req *a2a.SendMessageRequest) error {
	if err := validateMessage(req.Message); err != nil {
		return err
	}
	if req.Message.TaskID != "" {
		if err := checkTaskID("message.taskId", req.Message.TaskID, ""); err != nil {
			return err
		}
	}
	if c := req.Configuration; c != nil {
		if err := checkHistoryLength("configuration.historyLength", c.HistoryLength); err != nil {
			return err
		}
		if err := checkOutputModes(c.AcceptedOutputModes); err != nil {
			return err
		}
		if pc := c.PushConfig; pc != nil {
			if d.cfg.Push == nil {
				return a2a.ErrPushNotificationNotSupp.With("configuration.taskPushNotificationConfig needs push notifications, which this door does not offer; poll GetTask instead")
			}
			if err := d.checkPushConfig("configuration.taskPushNotificationConfig.", pc); err != nil {
				return err
			}
			if err := d.cfg.Push.CheckURL(pc.URL); err != nil {
				return a2a.InvalidParams(a2a.FieldViolation{Field: "configuration.taskPushNotificationConfig.url", Description: err.Error()})
			}
		}
	}
	return nil
}

// sendPushConfig stores the push notification config a SendMessage carried, for the task it started.
func (d *Door) sendPushConfig(ctx context.Context, caller Caller, req *a2a.SendMessageRequest, task *a2a.Task) error {
	c := req.Configuration
	if c == nil || c.PushConfig == nil || task.Status.State == a2a.TaskStateRejected {
		return nil
	}
	pc := *c.PushConfig
	pc.TaskID = task.ID
	_, err := d.createPushConfig(context.WithoutCancel(ctx), caller, "configuration.taskPushNotificationConfig.", pc)
	return err
}

// The media types a member takes in and answers with: a task is given as text and answered as text.
const (
	InputMode  = "text/plain"
	OutputMode = "text/plain"
)

// checkOutputModes refuses acceptedOutputModes that leave out the text a member answers with.
func checkOutputModes(modes []string) error {
	if len(modes) == 0 {
		return nil
	}
	for _, m := range modes {
		if mediaTypeCovers(m, OutputMode) {
			return nil
		}
	}
	return a2a.ErrContentTypeNotSupported.WithMeta("acceptedOutputModes", a2a.CutID(strings.Join(modes, ","))).With(fmt.Sprintf(
		"configuration.acceptedOutputModes %s: this member answers in %s only; accept %s (or leave acceptedOutputModes out)",
		a2a.CutID(strings.Join(modes, ", ")), OutputMode, OutputMode))
}

// mediaTypeCovers reports whether the accepted media type (a type, "type/*" or "*/*", parameters
// ignored) covers mt.
func mediaTypeCovers(accepted, mt string) bool {
	a, _, err := mime.ParseMediaType(accepted)
	if err != nil {
		return false
	}
	if a == "*/*" || a == mt {
		return true
	}
	typ, _, _ := strings.Cut(mt, "/")
	return a == typ+"/*"
}

// partMediaType is the media type of a part: its mediaType, or what its kind implies.
func partMediaType(p a2a.Part) (kind, mediaType string) {
	switch {
	case p.Text != nil:
		kind, mediaType = "text", "text/plain"
	case p.Data != nil:
		kind, mediaType = "data", "application/json"
	case p.Raw != nil:
		kind, mediaType = "raw", "application/octet-stream"
	default:
		kind, mediaType = "url", "application/octet-stream"
	}
	if p.MediaType != "" {
		mediaType = p.MediaType
	}
	return kind, mediaType
}

// checkInputModes refuses a message with a part of a media type the member does not take in, naming
// the first such part: the task is given as text, so a file or data part would be lost.
func checkInputModes(parts []a2a.Part) error {
	for i, p := range parts {
		kind, mt := partMediaType(p)
		base, _, err := mime.ParseMediaType(mt)
		if err == nil && base == InputMode {
			continue
		}
		return a2a.ErrContentTypeNotSupported.WithMeta("part", strconv.Itoa(i)).With(fmt.Sprintf(
			"message.parts[%d] is a %s part of media type %s: this member takes %s only and would lose it; send the content as a text part",
			i, kind, a2a.CutID(mt), InputMode))
	}
	return nil
}

// checkFollowUpModes refuses a follow-up's file parts: a follow-up answers a task's question with text,
// or decides an approval with a data part.
func checkFollowUpModes(parts []a2a.Part) error {
	for i, p := range parts {
		if p.Data != nil {
			continue
		}
		if err := checkInputModes([]a2a.Part{p}); err != nil {
			kind, mt := partMediaType(p)
			return a2a.ErrContentTypeNotSupported.WithMeta("part", strconv.Itoa(i)).With(fmt.Sprintf(
				"message.parts[%d] is a %s part of media type %s: a follow-up answers with text, or with a data part {\"decision\": \"allow\" | \"deny\"}",
				i, kind, a2a.CutID(mt)))
		}
	}
	return nil
}

// submit hands a checked message to the executor as the caller's, and keeps the push config sent with it.
func (d *Door) submit(ctx context.Context, caller Caller, req *a2a.SendMessageRequest) (*a2a.Task, error) {
	origin, err := d.origin(caller, req.Message)
	if err != nil {
		return nil, err
	}
	if err := d.checkPushRoom(ctx, caller, req); err != nil {
		return nil, err
	}
	// A new task's push config is registered as soon as the task is stored, before it can start, so the
	// webhook gets each change from SUBMITTED on; a follow-up's, once the message is taken.
	registered := false
	if c := req.Configuration; c != nil && c.PushConfig != nil {
		origin.Stored = func(t *a2a.Task) error {
			registered = true
			return d.sendPushConfig(ctx, caller, req, t)
		}
		// A retried message's task has the config its first copy carried.
		origin.Retried = func(*a2a.Task) { registered = true }
	}
	task, err := d.cfg.Executor.Send(ctx, req.Message, origin)
	if err != nil {
		return nil, err
	}
	if !registered {
		if err := d.sendPushConfig(ctx, caller, req, task); err != nil {
			return nil, err
		}
	}
	return task, nil
}

func (d *Door) sendMessage(ctx context.Context, caller Caller, req *a2a.SendMessageRequest, release func()) (any, error) {
	if err := d.checkSend(req); err != nil {
		return nil, err
	}
	var histLen *int
	blocking := true
	if c := req.Configuration; c != nil {
		blocking = !c.ReturnImmediately
		histLen = c.HistoryLength
	}
	task, err := d.submit(ctx, caller, req)
	if err != nil {
		return nil, err
	}
	if task.Status.State == a2a.TaskStateRejected {
		release()
		d.pacer.pace(ctx)
	}
	if blocking && !task.Status.State.Terminal() {
		release()
		if task, err = d.cfg.Executor.Wait(ctx, task.ID); err != nil {
			return nil, err
		}
	}
	if d.cfg.AnswersMessage && task.Status.State == a2a.TaskStateCompleted && task.Status.Message != nil &&
		ids.Get(ids.Murmur(task.Metadata), ids.MetaOneTurn) == true {
		return a2a.SendMessageResponse{Message: task.Status.Message}, nil
	}
	task.TrimHistory(histLen)
	return a2a.SendMessageResponse{Task: task}, nil
}

// origin derives a task's origin from who sent it: the operator's tasks are trusted; a peer's carry the
// caller and trust class of its credential. What a peer's message.metadata.murmur says of its caller
// and trust must agree with the credential: a request claiming otherwise is refused and recorded.
func (d *Door) origin(caller Caller, msg *a2a.Message) (member.Origin, error) {
	if caller.Principal == Operator {
		return member.Origin{Trust: member.TrustTrusted, Origin: member.OriginOperator}, nil
	}
	meta := ids.Murmur(msg.Metadata)
	claimed, hasCaller := ids.Lookup(meta, ids.MetaCaller)
	claimedTrust, hasTrust := ids.Lookup(meta, ids.MetaTrust)
	if (hasCaller && claimed != caller.Member) || (hasTrust && claimedTrust != caller.Trust) {
		d.cfg.Executor.RecordRefusal(map[string]any{
			"reason": "metadata_mismatch", "caller": caller.Member, "trust": caller.Trust,
			"claimed_caller": claimed, "claimed_trust": claimedTrust,
		})
		d.cfg.Logger.Warn("peer request refused: its metadata claims another identity than its credential",
			"caller", caller.Member, "trust", caller.Trust)
		return member.Origin{}, a2a.ErrUnauthorized.WithMeta("caller", caller.Member).With(fmt.Sprintf(
			"message.metadata.murmur claims caller %v with trust %v, but the request's credential is %s's for %s tasks: a peer's identity and trust class come from its credential",
			shortAny(claimed, caller.Member), shortAny(claimedTrust, caller.Trust), caller.Member, caller.Trust))
	}
	o := member.Origin{Trust: caller.Trust, Origin: member.OriginPeer, Caller: caller.Member}
	o.CallID, _ = ids.Get(meta, ids.MetaCallID).(string)
	o.CallerTaskID, _ = ids.Get(meta, ids.MetaCallerTaskID).(string)
	return o, nil
}

// shortAny renders a claimed metadata value for an error message: what was claimed, cut, or the
// credential's own value when nothing was.
func shortAny(v any, dflt string) string {
	if v == nil {
		return dflt
	}
	b, _ := json.Marshal(v)
	return a2a.CutID(string(b))
}

// mayCall reports whether the roster lets member reach this door's member.
func (d *Door) mayCall(name string) bool {
	return d.cfg.Roster != nil && d.cfg.Roster.MayCall(name, d.cfg.Member)
}

// isMember reports whether name is a member of this door's formation.
func (d *Door) isMember(name string) bool {
	if d.cfg.Roster == nil {
		return false
	}
	_, ok := d.cfg.Roster.Member(name)
	return ok
}

func (d *Door) listTasks(ctx context.Context, req *a2a.ListTasksRequest, scope store.Scope) (any, error) {
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
	q := store.ListQuery{ContextID: req.ContextID, State: req.Status, PageSize: size, PageToken: req.PageToken}
	if req.StatusTimestampAfter != nil {
		q.After = req.StatusTimestampAfter.Time
	}
	page, err := d.cfg.Executor.List(ctx, q, scope)
	if err != nil {
		return nil, err
	}
	out := a2a.ListTasksResponse{Tasks: make([]a2a.Task, 0, len(page.Tasks)), NextPageToken: page.NextPageToken,
		PageSize: size, TotalSize: page.Total}
	for _, t := range page.Tasks {
		t.TrimHistory(req.HistoryLength)
		if !req.IncludeArtifacts {
			t.Artifacts = nil
		}
		out.Tasks = append(out.Tasks, *t)
	}
	return out, nil
}

// decodeParams decodes params into v. Every field may be named by its JSON name (taskId) or by its proto
// field name (task_id), as ProtoJSON parsers accept (a2a.JSONNames), the same field under both names with
// different values being refused. Unknown fields are ignored, as A2A says; missing params and values of
// the wrong type are invalid params naming the field.
func decodeParams(params json.RawMessage, v any) error {
	if len(params) == 0 || string(params) == "null" {
		return a2a.InvalidParams(a2a.FieldViolation{Field: "params", Description: "required: this method takes a params object"})
	}
	params, err := a2a.JSONNames(params)
	if err != nil {
		return err
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
	if len(m.Parts) > MaxParts {
		return a2a.InvalidParams(a2a.FieldViolation{Field: "message.parts",
			Description: fmt.Sprintf("%d parts: a message may have at most %d; put the content in fewer parts", len(m.Parts), MaxParts)})
	}
	if n := partBytes(m.Parts); n > MaxMessageBytes {
		return a2a.InvalidParams(a2a.FieldViolation{Field: "message.parts",
			Description: fmt.Sprintf("the parts hold %d bytes: a message may hold at most %d (%s); send less, or hand a large file over as a peer file", n, MaxMessageBytes, humanBytes(MaxMessageBytes))})
	}
	for i, p := range m.Parts {
		n := 0
		if p.Text != nil {
			n++
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
	if len(v) > 0 {
		return a2a.InvalidParams(v...)
	}
	if m.TaskID != "" {
		return checkFollowUpModes(m.Parts)
	}
	return checkInputModes(m.Parts)
}

// The limits of one message's parts: a task's message is stored, cached and put in front of a model, so
// its size is bounded apart from the body limit.
const (
	MaxParts        = 64
	MaxMessageBytes = 1 << 20
)

// partBytes is the size of a message's content: text, raw bytes, URLs and data (as JSON).
func partBytes(parts []a2a.Part) int {
	n := 0
	for _, p := range parts {
		if p.Text != nil {
			n += len(*p.Text)
		}
		n += len(p.Raw) + len(p.URL) + len(p.Data)
	}
	return n
}

func checkHistoryLength(field string, n *int) error {
	if n != nil && *n < 0 {
		return a2a.InvalidParams(a2a.FieldViolation{Field: field, Description: fmt.Sprintf("%d is negative: use 0 to omit history, or a positive count", *n)})
	}
	return nil
}

func isJSON(ct string) bool {
	switch ct {
	case "":
		return false
	case "application/json":
		return true // the common case, without parsing
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

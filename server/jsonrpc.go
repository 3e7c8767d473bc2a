package server

import (
	"bytes"
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
)

// This file is the JSON-RPC envelope: a request's body read and parsed into a request, the rules of the
// envelope (no batches, no notifications, the id's type, the version), and the reply written back. What a
// method does with its params is in methods.go; what a message must hold, in validate.go.

// envelope is a JSON-RPC request as it comes. Its params stay raw: they are decoded once, by the method
// that takes them. (jsonrpc2.Request's own UnmarshalJSON decodes them into a map and marshals them again.)
type envelope struct {
	JSONRPC *string         `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// request is one JSON-RPC request as far as its envelope has been checked: a request refused half-way
// carries the method and id known by then, which the refusal is answered and counted with.
type request struct {
	method string
	id     json.RawMessage // nullID until the envelope's id is checked
	params json.RawMessage
}

// reply is what the door answers one request with: the method it named (for the metrics and the span),
// the id to answer with, a result or an error, and the HTTP status to send it under.
type reply struct {
	method string
	id     json.RawMessage
	result any // a *stream for a streaming method
	err    *jsonrpc2.Error
	status int
}

// response is the JSON-RPC response envelope. jsonrpc2.Response cannot say "id": null, which the answers
// to unparseable requests and batches need, so the id is kept raw here; errors are jsonrpc2's own type.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *jsonrpc2.Error `json:"error,omitempty"`
}

var nullID = json.RawMessage("null")

// statusError is a refusal answered under an HTTP status of its own instead of A2A's 200: a missing or
// wrong token (401), an oversize body (413), a full door (503).
type statusError struct {
	status int
	err    *a2a.Error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// fail is the reply that answers req with err. A statusError is only ever returned as it is, never
// wrapped: a type assertion finds it without the allocation errors.As would cost every refusal.
func (req request) fail(err error) reply {
	status := http.StatusOK
	if se, ok := err.(*statusError); ok {
		status = se.status
	}
	return reply{method: req.method, id: req.id, err: a2a.ToJSONRPC(err), status: status}
}

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
	rep := d.handle(r)
	nameRequestSpan(span, rep.method, rep.result, rep.err)
	d.observe(rep, start)
	switch rep.status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="murmur"`)
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	}
	if st, ok := rep.result.(*stream); ok && rep.err == nil {
		d.serveStream(w, r, rep.id, st)
		return
	}
	if rep.err != nil && rep.status == http.StatusOK && isStreaming(rep.method) && d.cfg.Events != nil {
		writeStreamError(w, rep.id, rep.err)
		return
	}
	writeResponse(w, rep.status, response{JSONRPC: "2.0", ID: rep.id, Result: rep.result, Error: rep.err})
}

// observe counts rep in the door's metrics, under its method (other for one the door does not serve)
// and its code, and logs an error at debug level.
func (d *Door) observe(rep reply, start time.Time) {
	code := "ok"
	if rep.err != nil {
		code = strconv.FormatInt(rep.err.Code, 10)
	}
	label := rep.method
	if !knownMethod(rep.method) {
		label = "other"
	}
	d.metrics.requests.WithLabelValues(label, code).Inc()
	d.metrics.duration.WithLabelValues(label).Observe(time.Since(start).Seconds())
	if rep.err != nil {
		d.cfg.Logger.Debug("json-rpc error", "method", rep.method, "code", rep.err.Code, "message", rep.err.Message)
	}
}

// handle reads, checks and runs one request, in the order serveJSONRPC gives.
func (d *Door) handle(r *http.Request) reply {
	req := request{id: nullID}
	caller, why := d.auth.authenticate(r)
	if caller.Principal == Nobody {
		d.pacer.pace(r.Context())
		return req.fail(&statusError{http.StatusUnauthorized, a2a.ErrUnauthenticated.With(why)})
	}
	if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
		return req.fail(a2a.ErrContentTypeNotSupported.With(fmt.Sprintf(
			"Content-Type %q is not supported: send the JSON-RPC request as application/json", ct)))
	}
	body, release, err := d.readBody(r)
	if err != nil {
		return req.fail(err)
	}
	defer release()
	if req, err = parseRequest(body); err != nil {
		return req.fail(err)
	}
	if err := checkVersion(r, req.method); err != nil {
		return req.fail(err)
	}
	ctx := r.Context()
	if a2a.Method(req.method) == a2a.MethodSubscribeToTask {
		if ctx, err = withLastEventID(ctx, r); err != nil {
			return req.fail(err)
		}
	}
	result, err := d.dispatch(ctx, a2a.Method(req.method), call{caller: caller, params: req.params, release: release})
	if err != nil {
		return req.fail(err)
	}
	return reply{method: req.method, id: req.id, result: result, status: http.StatusOK}
}

// readBody reads r's body once the door's admission lets it in, and returns it with the function that
// gives the admission back. A body over the door's limit is refused unread when its length is declared.
func (d *Door) readBody(r *http.Request) (body []byte, release func(), err error) {
	if r.ContentLength > d.cfg.MaxBody {
		return nil, nil, d.tooBig()
	}
	release, err = d.admit.acquire(r.Context(), bodyWeight(r.ContentLength, d.cfg.MaxBody))
	if err != nil {
		return nil, nil, &statusError{http.StatusServiceUnavailable, a2a.ErrInternal.With(err.Error())}
	}
	body, err = io.ReadAll(http.MaxBytesReader(nil, r.Body, d.cfg.MaxBody))
	if err != nil {
		release()
		if errors.As(err, new(*http.MaxBytesError)) {
			return nil, nil, d.tooBig()
		}
		return nil, nil, a2a.ErrInvalidRequest.With("reading the request body failed: " + err.Error())
	}
	return body, release, nil
}

// tooBig refuses a body over the door's limit, naming the limit and how to raise it.
func (d *Door) tooBig() error {
	return &statusError{http.StatusRequestEntityTooLarge, a2a.ErrInvalidRequest.With(fmt.Sprintf(
		"request body is larger than this door's limit of %d bytes (%s); send a smaller message, or start the door with a larger --max-body",
		d.cfg.MaxBody, humanBytes(d.cfg.MaxBody)))}
}

// parseRequest parses body as one JSON-RPC request and checks its envelope: a batch and a notification
// are refused, and so is an id that is neither a string nor a whole number, or longer than a2a.MaxIDBytes.
func parseRequest(body []byte) (request, error) {
	req := request{id: nullID}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		if !json.Valid(trimmed) {
			return req, a2a.ErrParse.With("request body is not valid JSON")
		}
		return req, a2a.ErrInvalidRequest.With("batch requests are not served: send one JSON-RPC request object per HTTP request; nothing in the batch was run")
	}
	var env envelope
	if err := json.Unmarshal(trimmed, &env); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) || len(trimmed) == 0 {
			return req, a2a.ErrParse.With("request body is not valid JSON: " + syntaxError(trimmed))
		}
		return req, a2a.ErrInvalidRequest.With("the request must be a JSON object with jsonrpc, id, method and params")
	}
	if err := checkIDType(env.ID); err != nil {
		return req, err
	}
	var method string // not req.method: its address would move all of req to the heap
	if len(env.Method) == 0 || env.Method[0] != '"' || json.Unmarshal(env.Method, &method) != nil {
		return req, a2a.ErrInvalidRequest.With("invalid JSON-RPC request: missing method field")
	}
	req.method = method
	if len(env.ID) == 0 || string(env.ID) == "null" {
		return req, a2a.ErrInvalidRequest.With(`the request has no "id": notifications are not served; add an id (a string or a number)`)
	}
	if len(env.ID) > a2a.MaxIDBytes {
		return req, a2a.ErrInvalidRequest.With(fmt.Sprintf(`"id" is %d bytes long: a request id may be at most %d bytes`, len(env.ID), a2a.MaxIDBytes))
	}
	req.id = env.ID
	if env.JSONRPC == nil || *env.JSONRPC != "2.0" {
		return req, a2a.ErrInvalidRequest.With(`"jsonrpc" must be "2.0"`)
	}
	if req.method == "" {
		return req, a2a.ErrInvalidRequest.With(`"method" is empty: name an A2A 1.0 method such as SendMessage`)
	}
	req.params = env.Params
	return req, nil
}

// checkIDType refuses an id that is neither a string, a number nor null, and a number that is not a
// whole one sourcegraph/jsonrpc2 can keep (it keeps a numeric id as an unsigned integer; JSON-RPC
// discourages fractions).
func checkIDType(id json.RawMessage) error {
	if len(id) == 0 {
		return nil
	}
	numeric := id[0] == '-' || id[0] >= '0' && id[0] <= '9'
	if !numeric && id[0] != '"' && id[0] != 'n' {
		return a2a.ErrInvalidRequest.With(`"id" must be a string or a number`)
	}
	if numeric {
		if _, err := strconv.ParseUint(string(id), 10, 64); err != nil {
			return a2a.ErrInvalidRequest.With(fmt.Sprintf(`"id" %s is not a whole number from 0 to %d: use such a number, or a string`,
				a2a.CutID(string(id)), uint64(math.MaxUint64)))
		}
	}
	return nil
}

// checkVersion refuses a request of another A2A version than 1.0: by its A2A-Version, or by a 0.3
// method name. The version comes as the A2A-Version header or, for clients that cannot set headers, as
// the A2A-Version request parameter of the URL; the header wins when both are sent.
func checkVersion(r *http.Request, method string) error {
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
			return a2a.ErrVersionNotSupported.WithMeta("version", v).With(fmt.Sprintf(
				"A2A-Version %s is not supported: this door speaks A2A 1.0; send A2A-Version: 1.0", shown))
		}
	}
	if a2a.IsLegacyMethod(method) {
		return a2a.ErrVersionNotSupported.WithMeta("method", method).With(fmt.Sprintf(
			"%s is an A2A 0.3 method: this door speaks A2A 1.0 (SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask, …)", method))
	}
	return nil
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
		// A client that stopped reading has lost the answer: no one is left to tell.
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`)
		w.Write(resp.ID)
		_, _ = io.WriteString(w, `,"result":`)
		w.Write(raw)
		_, _ = io.WriteString(w, "}\n")
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(resp); err != nil {
		resp = response{JSONRPC: "2.0", ID: resp.ID, Error: a2a.ToJSONRPC(a2a.ErrInternal)}
		buf.Reset()
		_ = enc.Encode(resp) // a client gone: no one is left to tell
	}
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// jsonContentType is the Content-Type of every JSON-RPC answer, one slice shared by all (net/http only
// reads it), so that setting it allocates nothing.
var jsonContentType = []string{"application/json"}

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

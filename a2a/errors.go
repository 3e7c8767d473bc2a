package a2a

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sourcegraph/jsonrpc2"
)

// The JSON-RPC error codes a door sends.
const (
	CodeParseError                  = -32700
	CodeInvalidRequest              = -32600
	CodeMethodNotFound              = -32601
	CodeInvalidParams               = -32602
	CodeInternalError               = -32603
	CodeTaskNotFound                = -32001
	CodeTaskNotCancelable           = -32002
	CodePushNotificationUnsupported = -32003
	CodeUnsupportedOperation        = -32004
	CodeContentTypeNotSupported     = -32005
	CodeInvalidAgentResponse        = -32006
	CodeExtendedCardNotConfigured   = -32007
	CodeExtensionSupportRequired    = -32008
	CodeVersionNotSupported         = -32009
	CodeUnauthenticated             = -31401
	CodeUnauthorized                = -31403
	// CodeServerError is JSON-RPC's implementation-defined server error (-32000 to -32099 are reserved
	// for those), which A2A clients read as a server error: a door answers a limit of its own with it.
	CodeServerError = -32000
)

// ErrorDomain is the google.rpc.ErrorInfo domain of A2A's errors.
const ErrorDomain = "a2a-protocol.org"

// Error is a protocol error: a JSON-RPC code, a message safe to show a remote caller, and the
// google.rpc.ErrorInfo reason and metadata, or the google.rpc.BadRequest field violations, it carries.
type Error struct {
	Code       int64
	Message    string
	Reason     string            // ErrorInfo reason; "" for the plain JSON-RPC errors
	Metadata   map[string]string // ErrorInfo metadata
	Violations []FieldViolation  // BadRequest field violations (CodeInvalidParams)
}

// FieldViolation is one entry of a google.rpc.BadRequest.
type FieldViolation struct {
	Field       string `json:"field"`
	Description string `json:"description"`
}

func (e *Error) Error() string {
	if len(e.Violations) > 0 {
		return fmt.Sprintf("%s (%d): %s: %s", e.Message, e.Code, e.Violations[0].Field, e.Violations[0].Description)
	}
	return fmt.Sprintf("%s (%d)", e.Message, e.Code)
}

// Is matches two errors of the same code, so errors.Is(err, ErrTaskNotFound) holds for any task id.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// With returns a copy of e with a different message.
func (e *Error) With(message string) *Error {
	c := *e
	c.Message = message
	return &c
}

// WithMeta returns a copy of e whose ErrorInfo metadata holds key=value.
func (e *Error) WithMeta(key, value string) *Error {
	c := *e
	c.Metadata = map[string]string{}
	for k, v := range e.Metadata {
		c.Metadata[k] = v
	}
	c.Metadata[key] = value
	return &c
}

// The protocol's errors. Wrap them with %w; ToJSONRPC finds them with errors.As.
var (
	ErrParse                     = &Error{Code: CodeParseError, Message: "Parse error"}
	ErrInvalidRequest            = &Error{Code: CodeInvalidRequest, Message: "Invalid request"}
	ErrMethodNotFound            = &Error{Code: CodeMethodNotFound, Message: "Method not found"}
	ErrInvalidParams             = &Error{Code: CodeInvalidParams, Message: "Invalid params"}
	ErrInternal                  = &Error{Code: CodeInternalError, Message: "Internal error"}
	ErrTaskNotFound              = &Error{Code: CodeTaskNotFound, Message: "Task not found", Reason: "TASK_NOT_FOUND"}
	ErrTaskNotCancelable         = &Error{Code: CodeTaskNotCancelable, Message: "Task cannot be canceled", Reason: "TASK_NOT_CANCELABLE"}
	ErrPushNotificationNotSupp   = &Error{Code: CodePushNotificationUnsupported, Message: "Push notifications are not supported", Reason: "PUSH_NOTIFICATION_NOT_SUPPORTED"}
	ErrUnsupportedOperation      = &Error{Code: CodeUnsupportedOperation, Message: "This operation is not supported", Reason: "UNSUPPORTED_OPERATION"}
	ErrContentTypeNotSupported   = &Error{Code: CodeContentTypeNotSupported, Message: "Content type not supported", Reason: "CONTENT_TYPE_NOT_SUPPORTED"}
	ErrInvalidAgentResponse      = &Error{Code: CodeInvalidAgentResponse, Message: "Invalid agent response", Reason: "INVALID_AGENT_RESPONSE"}
	ErrExtendedCardNotConfigured = &Error{Code: CodeExtendedCardNotConfigured, Message: "Extended agent card is not configured", Reason: "EXTENDED_AGENT_CARD_NOT_CONFIGURED"}
	ErrExtensionSupportRequired  = &Error{Code: CodeExtensionSupportRequired, Message: "Extension support required", Reason: "EXTENSION_SUPPORT_REQUIRED"}
	ErrVersionNotSupported       = &Error{Code: CodeVersionNotSupported, Message: "A2A version not supported", Reason: "VERSION_NOT_SUPPORTED"}
	ErrUnauthenticated           = &Error{Code: CodeUnauthenticated, Message: "Unauthenticated", Reason: "UNAUTHENTICATED"}
	ErrUnauthorized              = &Error{Code: CodeUnauthorized, Message: "Unauthorized", Reason: "UNAUTHORIZED"}
	// ErrStoreUnavailable is murmur's own server error: the member's task store (its database) did not
	// answer; the request changed nothing and may be sent again.
	ErrStoreUnavailable = &Error{Code: CodeServerError, Reason: "STORE_UNAVAILABLE",
		Message: "The member's task store is unreachable; the member keeps running: send the request again once its database is back"}
)

// InvalidParams returns an ErrInvalidParams carrying the given field violations.
func InvalidParams(violations ...FieldViolation) *Error {
	e := *ErrInvalidParams
	e.Violations = violations
	if len(violations) == 1 {
		e.Message = "Invalid params: " + violations[0].Field + ": " + violations[0].Description
	}
	return &e
}

const (
	typeErrorInfo  = "type.googleapis.com/google.rpc.ErrorInfo"
	typeBadRequest = "type.googleapis.com/google.rpc.BadRequest"
)

type errorInfo struct {
	Type     string            `json:"@type"`
	Reason   string            `json:"reason"`
	Domain   string            `json:"domain"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

type badRequest struct {
	Type            string           `json:"@type"`
	FieldViolations []FieldViolation `json:"fieldViolations"`
}

// ToJSONRPC returns the one wire error for err: the *Error it wraps, or ErrInternal, whose message
// reveals nothing of err. The result is a bare *jsonrpc2.Error, as sourcegraph/jsonrpc2 expects.
func ToJSONRPC(err error) *jsonrpc2.Error {
	var e *Error
	if !errors.As(err, &e) {
		e = ErrInternal
	}
	out := &jsonrpc2.Error{Code: e.Code, Message: e.Message}
	var details []any
	if e.Reason != "" {
		details = append(details, errorInfo{Type: typeErrorInfo, Reason: e.Reason, Domain: ErrorDomain, Metadata: e.Metadata})
	}
	if len(e.Violations) > 0 {
		details = append(details, badRequest{Type: typeBadRequest, FieldViolations: e.Violations})
	}
	if details != nil {
		raw, _ := json.Marshal(details)
		msg := json.RawMessage(raw)
		out.Data = &msg
	}
	return out
}

// FromJSONRPC turns a wire error back into an *Error, keeping its reason, metadata and violations.
func FromJSONRPC(je *jsonrpc2.Error) *Error {
	e := &Error{Code: je.Code, Message: je.Message}
	if je.Data == nil {
		return e
	}
	var details []json.RawMessage
	if json.Unmarshal(*je.Data, &details) != nil {
		return e
	}
	for _, d := range details {
		var head struct {
			Type string `json:"@type"`
		}
		_ = json.Unmarshal(d, &head)
		switch head.Type {
		case typeErrorInfo:
			var info errorInfo
			if json.Unmarshal(d, &info) == nil {
				e.Reason, e.Metadata = info.Reason, info.Metadata
			}
		case typeBadRequest:
			var br badRequest
			if json.Unmarshal(d, &br) == nil {
				e.Violations = br.FieldViolations
			}
		}
	}
	return e
}

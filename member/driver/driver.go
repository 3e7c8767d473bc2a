package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/murmur-run/murmur/member/capsule"
)

// Role says who a ChatMessage is from.
type Role string

// The roles of a conversation.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// ChatMessage is one entry of the conversation the model sees.
type ChatMessage struct {
	Role    Role
	Text    string       // user/assistant text (for RoleTool: empty)
	Calls   []ToolCall   // RoleAssistant: the tool calls of that turn
	Results []ToolResult // RoleTool: results of the previous assistant turn's calls, in order
}

// ToolCall is one tool call the model made.
type ToolCall struct {
	ID    string
	Name  string
	Input json.RawMessage
}

// ToolResult is the runtime's answer to one ToolCall.
type ToolResult struct {
	CallID string
	Tool   string
	Status string // "ok" | "error" | "refused"
	Output string // the tool's raw output
	Data   any    // structured data, or nil
	Text   string // exactly what the model is sent for this call (fence, output, note)
}

// ToolSpec is one entry of the tool array sent with an inference call.
type ToolSpec struct {
	Name        string
	Description string
	InputSchema json.RawMessage
}

// Usage is the token count of one inference call. Reported is true when the provider gave the counts
// (the script driver is its own provider and reports its deterministic count); Estimated is true when
// the provider gave none and Input and Output are the runtime's own estimate (EstimateTokens), which
// session-status does not sum into its tokens (SPEC: "Sums of what the provider reported").
type Usage struct {
	Input      int64
	Output     int64
	Cached     int64
	CacheWrite int64
	Reported   bool
	Estimated  bool
	// CacheReported is true when the provider reports cache reads and writes (Cached, CacheWrite), even
	// as zero; CacheApart is true when its Input leaves them out (Anthropic), so the conversation's size
	// is Input plus both.
	CacheReported bool
	CacheApart    bool
}

// InferRequest is one inference call: the whole conversation so far.
type InferRequest struct {
	System   string
	Messages []ChatMessage
	Tools    []ToolSpec
	Turn     int    // 1-based, within the task
	Task     string // raw task text
	// MaxOutputTokens, when more than 0, caps this call's output below the choice's max_output_tokens
	// (OutputCap): a hook's run_inference asks for a short answer this way (DESIGN §18).
	MaxOutputTokens int
	// Answers are the member answers and delegation outcomes of the latest continuation, each a map with
	// the keys member, call_id, status and output; the script driver offers them as .answers. Nil when
	// there are none.
	Answers []map[string]any
}

// OutputCap is the output cap of a call of req on a choice whose max_output_tokens is choiceCap (0: none):
// the smaller of the two that are set; 0 when neither is.
func (req InferRequest) OutputCap(choiceCap int) int {
	if n := req.MaxOutputTokens; n > 0 && (choiceCap <= 0 || n < choiceCap) {
		return n
	}
	return max(choiceCap, 0)
}

// InferResponse is what a driver answers: text, tool calls, or both. A response with no call ends the
// task with Text as its answer.
type InferResponse struct {
	Text  string
	Calls []ToolCall
	Usage Usage
	// Ask is a question for the task's sender (the script driver's ask: turn): the task waits for the
	// answer, which comes back as a user message. Text and Calls are empty then.
	Ask string
	// Data is an answer as a JSON value (the script driver's data: turn); Text holds the same JSON.
	Data json.RawMessage
}

// Driver serves inference calls. Implementations must be safe for concurrent use by different tasks.
type Driver interface {
	Name() string
	Infer(ctx context.Context, req InferRequest) (InferResponse, error)
}

// ModelView renders one message as the model sees it: its text; for RoleAssistant, followed by one line
// per tool call ("[call ID] NAME INPUT"); for RoleTool, the results' Text joined by "\n\n".
func (m ChatMessage) ModelView() string {
	switch m.Role {
	case RoleTool:
		texts := make([]string, len(m.Results))
		for i, r := range m.Results {
			texts[i] = r.Text
		}
		return strings.Join(texts, "\n\n")
	case RoleAssistant:
		if len(m.Calls) == 0 {
			return m.Text
		}
		var b strings.Builder
		b.WriteString(m.Text)
		for _, c := range m.Calls {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString("[call ")
			b.WriteString(c.ID)
			b.WriteString("] ")
			b.WriteString(c.Name)
			if len(c.Input) > 0 {
				b.WriteByte(' ')
				b.Write(c.Input)
			}
		}
		return b.String()
	}
	return m.Text
}

// EstimateTokens is the runtime's own token count of text, used when a provider reports none: one token
// per four characters, rounded up.
func EstimateTokens(text string) int64 {
	return int64((utf8.RuneCountInString(text) + 3) / 4)
}

// EstimateInput is the runtime's own count of the input tokens of req: its system prompt, every message
// as the model sees it, and the tool array.
func EstimateInput(req InferRequest) int64 {
	n := utf8.RuneCountInString(req.System)
	for _, m := range req.Messages {
		n += utf8.RuneCountInString(m.ModelView())
	}
	for _, t := range req.Tools {
		n += utf8.RuneCountInString(t.Name) + utf8.RuneCountInString(t.Description) + utf8.RuneCount(t.InputSchema)
	}
	return int64((n + 3) / 4)
}

// checkModelChoice is what every model driver checks of its choice: the right driver, a model, a
// credential unless a base_url names a local server, and a way to resolve env: credentials.
func checkModelChoice(driver, provider, keyVar, name string, ch capsule.Choice, getenv func(string) string) error {
	switch {
	case ch.Driver != "" && ch.Driver != driver:
		return fmt.Errorf("%s choice %s: it uses driver %q, not %s", driver, name, ch.Driver, driver)
	case ch.Model == "":
		return fmt.Errorf("%s choice %s names no model; add one, such as model: %s", driver, name, capsule.ExampleModels[driver])
	case ch.Credential == "" && ch.BaseURL == "":
		return fmt.Errorf("%s choice %s has no credential, which the %s API needs; add credential: env:%s (only a choice with a base_url, a local server, may go without)", driver, name, provider, keyVar)
	case getenv == nil:
		return fmt.Errorf("%s choice %s: no getenv to resolve its credential with", driver, name)
	}
	return nil
}

// errorBodyLimit caps how much of a provider's error body that is not its own error object (a proxy's
// page, a server's plain text) is quoted in an error.
const errorBodyLimit = 300

// quoteErrorBody returns the start of an error body, its runs of white space folded to one space.
func quoteErrorBody(body io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(body, errorBodyLimit+1))
	msg := strings.Join(strings.Fields(string(b)), " ")
	if len(b) > errorBodyLimit {
		msg = strings.ToValidUTF8(msg[:min(len(msg), errorBodyLimit)], "") + "…"
	}
	return msg
}

// secretLikeRE finds API keys, masked or not, that a provider or proxy may quote back (a 401 says
// "Incorrect API key provided: sk-proj-****…Ab1c"; Anthropic's keys read sk-ant-api03-…).
var secretLikeRE = regexp.MustCompile(`\bsk-[A-Za-z0-9_*\-]{4,}`)

// redactSecrets removes the credential the call presented, and anything shaped like an API key, from a
// provider's message before it reaches an error.
func redactSecrets(msg, key string) string {
	if key != "" {
		msg = strings.ReplaceAll(msg, key, "[credential]")
	}
	return secretLikeRE.ReplaceAllString(msg, "sk-[redacted]")
}

// Fence wraps content the model must treat as data, not instructions, as SPEC shows; the runtime's note,
// if any, goes on the line after the fence.
func Fence(source, content, note string) string {
	var b strings.Builder
	b.WriteString("<untrusted-content source=")
	b.WriteString(source)
	b.WriteString(">\n")
	b.WriteString(content)
	if !strings.HasSuffix(content, "\n") {
		b.WriteByte('\n')
	}
	b.WriteString("</untrusted-content>")
	if note != "" {
		b.WriteByte('\n')
		b.WriteString(note)
	}
	return b.String()
}

// Measure is what one inference call used: its input and output tokens (the provider's count, or an
// estimate where it reported none), the size of the conversation it saw (used: the cache's reads and
// writes included where the provider counts them apart) and how that was measured ("actual" or
// "estimate").
func Measure(req InferRequest, resp InferResponse) (in, out, used int64, measured string) {
	u := resp.Usage
	in, out = u.Input, u.Output
	if !u.Reported && !u.Estimated {
		in, out = EstimateInput(req), EstimateTokens(resp.Text)
	}
	measured, used = "estimate", in+out
	if u.Reported {
		measured = "actual"
		if u.CacheApart {
			used += u.Cached + u.CacheWrite // the conversation holds what the cache read and wrote too
		}
	}
	return in, out, used, measured
}

// Compact shortens a conversation past its context budget: the task's message stays, the oldest turns
// after it go, and the task's message tells the model how many. It cuts at an assistant message, so no
// tool result is left without its call, and keeps the last two turns. It returns how many messages it
// removed; 0 when none could go.
func Compact(req *InferRequest) int {
	if len(req.Messages) < 4 {
		return 0
	}
	cut := -1
	for i := len(req.Messages) - 4; i >= 1; i-- {
		if req.Messages[i].Role == RoleAssistant {
			cut = i
			break
		}
	}
	if cut <= 1 {
		return 0
	}
	removed := cut - 1
	req.Messages = append(req.Messages[:1:1], req.Messages[cut:]...)
	noteRemoved(req, removed)
	return removed
}

// CompactFront removes the first n messages of a conversation (the earlier tasks of a context, which go
// first, DESIGN §15), and the message that is first then tells the model how many. It returns n.
func CompactFront(req *InferRequest, n int) int {
	req.Messages = req.Messages[n:]
	noteRemoved(req, n)
	return n
}

// noteRemoved tells the model, in the conversation's first message, that removed messages went.
func noteRemoved(req *InferRequest, removed int) {
	first := req.Messages[0]
	first.Text += fmt.Sprintf("\n\n[runtime] %d earlier message(s) of this conversation were removed to keep it within the context budget.", removed)
	req.Messages = append([]ChatMessage{first}, req.Messages[1:]...)
}

// exchange is one inference call of a provider driver, in the shape the openai and anthropic drivers
// share: resolve the choice's credential (none: an empty key), build the provider's request from req,
// send it, and read its answer. where names the choice in every error but the provider's own, which
// failure words (without the key).
func exchange[P, R any](ctx context.Context, req InferRequest, credential string, getenv func(string) string, where func() string,
	build func(InferRequest) (P, error), send func(context.Context, P, string) (R, error),
	failure func(error, string) error, read func(R, InferRequest) (InferResponse, error)) (InferResponse, error) {
	var key string
	if credential != "" {
		k, err := ResolveCredential(credential, getenv)
		if err != nil {
			return InferResponse{}, fmt.Errorf("%s: %w", where(), err)
		}
		key = k
	}
	params, err := build(req)
	if err != nil {
		return InferResponse{}, fmt.Errorf("%s: %w", where(), err)
	}
	answer, err := send(ctx, params, key)
	if err != nil {
		return InferResponse{}, failure(err, key)
	}
	resp, err := read(answer, req)
	if err != nil {
		return InferResponse{}, fmt.Errorf("%s: %w", where(), err)
	}
	return resp, nil
}

// estimatedUsage is the Usage of an answer whose provider reported none: the driver's own estimate of
// the conversation it was sent and of the answer as the model would see it.
func estimatedUsage(req InferRequest, resp InferResponse) Usage {
	out := ChatMessage{Role: RoleAssistant, Text: resp.Text, Calls: resp.Calls}
	return Usage{Input: EstimateInput(req), Output: EstimateTokens(out.ModelView()), Estimated: true}
}

// DefaultCompaction is the fraction of the context budget past which the conversation is compacted when
// inference.compaction.threshold is not set.
const DefaultCompaction = 0.8

// Compaction is what one compaction did: the tokens before (as last measured) and after (estimated),
// the budget and threshold it was measured against, and how many messages went.
type Compaction struct {
	Before, After, Budget int64
	Threshold             float64
	Removed               int
}

// CompactOver shortens req when used tokens are past threshold (DefaultCompaction when 0) of budget:
// the earlier tasks of its context (the first *hist messages) go first; then the task's message stays,
// the oldest turns after it go, and the model is told how many. ok is false when nothing went.
func CompactOver(req *InferRequest, hist *int, used, budget int64, threshold float64) (c Compaction, ok bool) {
	if budget <= 0 {
		return c, false
	}
	if threshold <= 0 {
		threshold = DefaultCompaction
	}
	if used <= int64(threshold*float64(budget)) {
		return c, false
	}
	var removed int
	if *hist > 0 {
		removed = CompactFront(req, *hist)
		*hist = 0
	} else if removed = Compact(req); removed == 0 {
		return c, false
	}
	return Compaction{Before: used, After: EstimateInput(*req), Budget: budget, Threshold: threshold, Removed: removed}, true
}

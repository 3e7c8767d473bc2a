package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// postQuery posts body to the door's /a2a with a query string.
func (f *fixture) postQuery(query, body string) rpcReply {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.url+"/a2a"+query, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testOperatorToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out rpcReply
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		f.t.Fatal(err)
	}
	return out
}

func sendWith(parts, config string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[` +
		parts + `]}` + config + `}}`
}

// TestConformanceDetails: the A2A 1.0 details a conformance run checks beyond the methods.
func TestConformanceDetails(t *testing.T) {
	f := startDoor(t, map[string]string{"murmur.yaml": echoAgent})
	for _, tc := range []struct {
		name, body string
		code       int64
		msgHas     string
	}{
		{"a data part only", sendWith(`{"data":{"a":1}}`, ""), -32005, "message.parts[0] is a data part of media type application/json: this member takes text/plain only"},
		{"text and a file", sendWith(`{"text":"look"},{"raw":"aGk=","mediaType":"image/png","filename":"x.png"}`, ""), -32005, "message.parts[1] is a raw part of media type image/png"},
		{"a URL part", sendWith(`{"text":"look"},{"url":"https://example.org/x.pdf","mediaType":"application/pdf"}`, ""), -32005, "message.parts[1] is a url part"},
		{"text of another type", sendWith(`{"text":"# hi","mediaType":"text/markdown"}`, ""), -32005, "media type text/markdown"},
		{"output modes the member cannot produce", sendWith(`{"text":"hi"}`, `,"configuration":{"acceptedOutputModes":["image/png","application/json"]}`), -32005,
			"configuration.acceptedOutputModes image/png, application/json: this member answers in text/plain only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rep := f.post(tc.body, nil)
			if rep.Error == nil || rep.Error.Code != tc.code || !strings.Contains(rep.Error.Message, tc.msgHas) {
				t.Errorf("got %+v, want %d saying %q", rep.Error, tc.code, tc.msgHas)
			}
		})
	}
	if n := f.taskCount(); n != 0 {
		t.Errorf("%d tasks exist after refused messages", n)
	}
	for _, modes := range []string{`["text/plain"]`, `["text/*"]`, `["application/json","*/*"]`, `["text/plain; charset=utf-8"]`} {
		if _, rep := f.post(sendWith(`{"text":"hi","mediaType":"text/plain"}`, `,"configuration":{"acceptedOutputModes":`+modes+`}`), nil); rep.Error != nil {
			t.Errorf("acceptedOutputModes %s refused: %+v", modes, rep.Error)
		}
	}

	// ListTasks without params is served with the defaults.
	for _, body := range []string{`{"jsonrpc":"2.0","id":2,"method":"ListTasks"}`, `{"jsonrpc":"2.0","id":2,"method":"ListTasks","params":null}`} {
		if _, rep := f.post(body, nil); rep.Error != nil || !strings.Contains(string(rep.Result), `"pageSize":50`) {
			t.Errorf("%s: %+v %s", body, rep.Error, rep.Result)
		}
	}

	// The version as a request parameter.
	get := `{"jsonrpc":"2.0","id":3,"method":"ListTasks","params":{}}`
	if rep := f.postQuery("?A2A-Version=1.0", get); rep.Error != nil {
		t.Errorf("?A2A-Version=1.0 refused: %+v", rep.Error)
	}
	if rep := f.postQuery("?A2A-Version=0.3", get); rep.Error == nil || rep.Error.Code != -32009 {
		t.Errorf("?A2A-Version=0.3: %+v, want -32009", rep.Error)
	}
	if _, rep := f.post(get, map[string]string{"A2A-Version": "1.0"}); rep.Error != nil {
		t.Errorf("header 1.0: %+v", rep.Error)
	}

	// The card: ETag and Last-Modified, each answering a conditional request with 304.
	resp, err := http.Get(f.url + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	lm, err := http.ParseTime(resp.Header.Get("Last-Modified"))
	if err != nil {
		t.Fatalf("Last-Modified %q: %v", resp.Header.Get("Last-Modified"), err)
	}
	for _, c := range []struct {
		header, value string
		want          int
	}{
		{"If-None-Match", resp.Header.Get("ETag"), 304},
		{"If-None-Match", `"other"`, 200},
		{"If-Modified-Since", lm.Format(http.TimeFormat), 304},
		{"If-Modified-Since", lm.Add(-time.Hour).Format(http.TimeFormat), 200},
	} {
		req, _ := http.NewRequest(http.MethodGet, f.url+"/.well-known/agent-card.json", nil)
		req.Header.Set(c.header, c.value)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != c.want {
			t.Errorf("%s: %s answered %d, want %d", c.header, c.value, r.StatusCode, c.want)
		}
	}
	if !strings.Contains(string(body), `"defaultInputModes":["text/plain"]`) {
		t.Errorf("card: %s", body)
	}
}

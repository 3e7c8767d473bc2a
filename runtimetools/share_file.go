package runtimetools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/murmur-run/murmur/member/records"
)

// Refusal is a peer-file call the session turned down. Reason names why in the trace record ("expired",
// "forged", "target_exists", …); Text is what the model is told; Fields are added to the record.
type Refusal struct {
	Reason string
	Text   string
	Fields map[string]any
	// Ran is true when the tool ran and failed (a fetch that reached the door), false for a call refused
	// before anything was done: only a tool that ran carries SPEC's deadline notice.
	Ran bool
}

func (r *Refusal) Error() string { return r.Text }

// SharedFile is a handle share-file minted, and the file it names.
type SharedFile struct {
	Handle  string
	ID      string // the handle's nonce in hex: records name it instead of the handle
	Name    string // the file's path under the export root
	Size    int64
	SHA256  string // hex
	Expires time.Time
}

// FileSharer is what share-file needs of the session.
type FileSharer interface {
	// ShareSettings returns exports.peer_files as murmur.yaml writes it and how long a handle works.
	ShareSettings() (root string, ttl time.Duration)
	// ShareFile mints a handle for the file at path under the export root. A refusal is a *Refusal.
	ShareFile(ctx context.Context, path string) (SharedFile, error)
}

// ShareFile is the share-file tool, staged for a capsule that declares exports.peer_files.
type ShareFile struct {
	Sharer   FileSharer
	Recorder Recorder
}

// Manifest names the export root and the handle's lifetime.
func (t *ShareFile) Manifest() Manifest {
	root, ttl := t.Sharer.ShareSettings()
	schema, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"path": map[string]any{"type": "string", "description": "the file to share, relative to the export root " + root},
		},
		"required": []string{"path"},
	})
	return NativeManifest("share-file",
		fmt.Sprintf("Mints a peer-file handle for one file under this capsule's export root (%s), so another member of this formation can fetch it with fetch-peer-file. ", root)+
			"path is relative to the export root. The handle is a short string: put it, exactly as written, in the task text you send that member with call-member. "+
			fmt.Sprintf("It works only for members of this formation, for %s, and only for this version of the file: if the file changes, share it again.", ttl), schema)
}

// Run mints the handle and writes one peer_file_share record, whether the call is refused or not.
func (t *ShareFile) Run(ctx context.Context, call Call) (Result, error) {
	var in struct {
		Path *string `json:"path"`
	}
	if err := json.Unmarshal(call.Input, &in); err != nil || in.Path == nil {
		return t.refused(call, "", &Refusal{Reason: "bad_input", Text: `'share-file' needs {"path": "<file under the export root>"}.`})
	}
	sf, err := t.Sharer.ShareFile(ctx, *in.Path)
	if err != nil {
		return t.refused(call, *in.Path, err)
	}
	expires := sf.Expires.UTC().Format(time.RFC3339)
	if err := t.Recorder.Write(records.TypePeerFileShare, call.Task, map[string]any{"status": StatusOK, "path": sf.Name,
		"size": sf.Size, "sha256": sf.SHA256, "handle_id": sf.ID, "expires": expires}); err != nil {
		return Result{}, err
	}
	body, _ := json.Marshal(orderedObject{{"handle", sf.Handle}, {"name", sf.Name}, {"size", sf.Size}, {"sha256", sf.SHA256}, {"expires_at", expires}})
	return Result{Status: StatusOK, Output: string(body), Summary: "Shared " + sf.Name,
		Data: map[string]any{"handle": sf.Handle, "name": sf.Name, "size": sf.Size, "sha256": sf.SHA256, "expires_at": expires},
		Note: fmt.Sprintf("[share-file] The handle is for members of this formation only: send it, exactly as written, in the task text of call-member, and the member stores %s (%d bytes, sha256 %s) in its own workdir with fetch-peer-file. It works until %s, and only while %s stays as it is now: if the file changes, share it again.",
			sf.Name, sf.Size, sf.SHA256, expires, sf.Name)}, nil
}

func (t *ShareFile) refused(call Call, path string, err error) (Result, error) {
	return refusedResult(records.TypePeerFileShare, t.Recorder, call, err, map[string]any{"path": path})
}

// refusedResult records a refused peer-file call and returns its tool error.
func refusedResult(record records.Type, rec Recorder, call Call, err error, fields map[string]any) (Result, error) {
	reason, text, status := "internal", err.Error(), StatusRefused
	var r *Refusal
	if errors.As(err, &r) {
		reason = r.Reason
		for k, v := range r.Fields {
			fields[k] = v
		}
		if r.Ran {
			status = StatusError
		}
	}
	fields["status"], fields["reason"], fields["message"] = StatusRefused, reason, text
	if err := rec.Write(record, call.Task, fields); err != nil {
		return Result{}, err
	}
	return Result{Status: status, Output: text}, nil
}

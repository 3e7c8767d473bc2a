package runtimetools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/murmur-run/murmur/member/records"
)

// FetchRequest is one fetch-peer-file call.
type FetchRequest struct {
	Handle    string
	As        string // the name in the workdir; "" keeps the shared file's name
	Overwrite bool   // replace a file already at that name
}

// FetchedFile is a file fetch-peer-file stored.
type FetchedFile struct {
	From     string // the member that shared it
	Name     string // its path under that member's export root
	Stored   string // where it is now, relative to the workdir
	Size     int64
	SHA256   string // hex
	ID       string // the handle's nonce in hex
	Replaced bool   // a file was at Stored and was replaced
}

// PeerFileFetcher is what fetch-peer-file needs of the session.
type PeerFileFetcher interface {
	// FetchLimitMB is the largest file the session stores, in MiB (capabilities.peer_fetch.max_mb).
	FetchLimitMB() int
	// FetchPeerFile redeems a handle at the door of the member that minted it and stores the file in the
	// workdir. A refusal is a *Refusal.
	FetchPeerFile(ctx context.Context, req FetchRequest) (FetchedFile, error)
}

// FetchPeerFile is the fetch-peer-file tool, staged for a capsule that declares capabilities.peer_fetch.
type FetchPeerFile struct {
	Fetcher  PeerFileFetcher
	Recorder Recorder
}

// Manifest describes fetch-peer-file with the session's size limit.
func (t *FetchPeerFile) Manifest() Manifest {
	return NativeManifest("fetch-peer-file",
		"Redeems a peer-file handle another member of this formation sent you (a string that starts with pf1., made by their share-file) and stores the file in your workdir. "+
			"as names the file in your workdir (default: the shared file's name); a file already there is replaced only with overwrite: true. "+
			fmt.Sprintf("The file is checked against the handle's SHA-256 before it is stored, and files larger than %d MiB are refused.", t.Fetcher.FetchLimitMB()),
		json.RawMessage(`{"type":"object","properties":{"handle":{"type":"string","description":"the handle exactly as the member sent it"},"as":{"type":"string","description":"the file's name in your workdir, relative to it; default: the shared file's name"},"overwrite":{"type":"boolean","description":"replace a file already at that name; default false"}},"required":["handle"]}`))
}

// Run fetches the file and writes one peer_file_fetch record, whether the call is refused or not.
func (t *FetchPeerFile) Run(ctx context.Context, call Call) (Result, error) {
	var in struct {
		Handle    *string `json:"handle"`
		As        string  `json:"as"`
		Overwrite bool    `json:"overwrite"`
	}
	if err := json.Unmarshal(call.Input, &in); err != nil || in.Handle == nil {
		return refusedResult(records.TypePeerFileFetch, t.Recorder, call, &Refusal{Reason: "bad_input",
			Text: `'fetch-peer-file' needs {"handle": "pf1.…"}, with "as": "<name>" and "overwrite": true optional.`}, map[string]any{})
	}
	f, err := t.Fetcher.FetchPeerFile(ctx, FetchRequest{Handle: strings.TrimSpace(*in.Handle), As: in.As, Overwrite: in.Overwrite})
	if err != nil {
		return refusedResult(records.TypePeerFileFetch, t.Recorder, call, err, map[string]any{})
	}
	if err := t.Recorder.Write(records.TypePeerFileFetch, call.Task, map[string]any{"status": StatusOK, "from": f.From, "path": f.Name,
		"stored": f.Stored, "size": f.Size, "sha256": f.SHA256, "handle_id": f.ID, "replaced": f.Replaced}); err != nil {
		return Result{}, err
	}
	body, _ := json.Marshal(orderedObject{{"file", f.Stored}, {"size", f.Size}, {"sha256", f.SHA256}, {"from", f.From}, {"name", f.Name}})
	note := fmt.Sprintf("[fetch-peer-file] %s from %s is now in your workdir at %s: %d bytes, and its SHA-256 matches the handle.", f.Name, f.From, f.Stored, f.Size)
	if f.Replaced {
		note += " It replaced the file that was there."
	}
	return Result{Status: StatusOK, Output: string(body), Summary: "Fetched " + f.Stored + " from " + f.From,
		Data: map[string]any{"file": f.Stored, "size": f.Size, "sha256": f.SHA256, "from": f.From, "name": f.Name},
		Note: note}, nil
}

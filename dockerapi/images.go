package dockerapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/waitdaemon/waitdaemon/imageref"
	"io"
	"net/http"
	"net/url"

	"github.com/waitdaemon/waitdaemon/internal/socketclient"
)

// ImageInspect returns the image named by ref (a name:tag, a name@digest,
// or an ID). A name with no tag means :latest.
func (c *Client) ImageInspect(ctx context.Context, ref string) (Image, error) {
	var out Image
	err := c.do(ctx, request{method: http.MethodGet, path: "/images/" + ref + "/json", ok: []int{200}, again: true}, &out)
	if err != nil {
		return Image{}, fmt.Errorf("inspecting image %q: %w", ref, err)
	}
	if out.Config == nil {
		out.Config = &Config{}
	}
	return out, nil
}

// AuthConfig holds registry credentials for a pull. It never prints them.
type AuthConfig struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
	ServerAddress string `json:"serveraddress,omitempty"`
}

// String keeps credentials out of logs and error messages.
func (a AuthConfig) String() string {
	if a.Username != "" {
		return fmt.Sprintf("credentials for %s (user %s)", a.ServerAddress, a.Username)
	}
	return fmt.Sprintf("identity token for %s", a.ServerAddress)
}

// GoString keeps credentials out of %#v too.
func (a AuthConfig) GoString() string { return a.String() }

// header encodes a as the X-Registry-Auth header: base64url of its JSON.
func (a AuthConfig) header() string {
	data, _ := json.Marshal(a)
	return base64.URLEncoding.EncodeToString(data)
}

// PullMessage is one line of the JSON stream that POST /images/create
// answers with.
type PullMessage struct {
	Status         string `json:"status,omitempty"`
	ID             string `json:"id,omitempty"`
	ProgressDetail struct {
		Current int64 `json:"current,omitempty"`
		Total   int64 `json:"total,omitempty"`
	} `json:"progressDetail"`
	Error       string `json:"error,omitempty"`
	ErrorDetail *struct {
		Code    int    `json:"code,omitempty"`
		Message string `json:"message,omitempty"`
	} `json:"errorDetail,omitempty"`
}

// ImagePull pulls ref, always by tag or digest (a bare name means
// :latest, never every tag). auth may be nil. progress, when set, sees
// every message of the stream. An error reported mid-stream, after the
// engine already answered 200, is returned as an error.
func (c *Client) ImagePull(ctx context.Context, ref imageref.Ref, auth *AuthConfig, progress func(PullMessage)) error {
	q := url.Values{"fromImage": {ref.Name()}, "tag": {ref.TagOrDigest()}}
	var h http.Header
	if auth != nil {
		h = http.Header{"X-Registry-Auth": {auth.header()}}
	}
	for broken := 0; ; broken++ {
		resp, err := c.send(ctx, request{method: http.MethodPost, path: "/images/create", query: q, header: h, ok: []int{200}, again: true})
		if err != nil {
			return fmt.Errorf("pulling image %s: %w", ref, err)
		}
		err = decodePull(resp.Body, progress)
		resp.Body.Close()
		// A stream that broke off is asked for again, a few times: the
		// engine keeps the layers it already has.
		if errors.Is(err, errBroken) && ctx.Err() == nil && broken < socketclient.MaxRetries {
			continue
		}
		if err != nil {
			return fmt.Errorf("pulling image %s: %w", ref, err)
		}
		return nil
	}
}

// errBroken marks a pull stream that ended without its end.
var errBroken = errors.New("the stream broke off")

// decodePull reads a pull's JSON stream to its end and returns the first
// error the stream reports.
func decodePull(r io.Reader, progress func(PullMessage)) error {
	dec := json.NewDecoder(r)
	for {
		var m PullMessage
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			var syntax *json.SyntaxError
			var wrongType *json.UnmarshalTypeError
			if errors.As(err, &syntax) || errors.As(err, &wrongType) {
				return fmt.Errorf("reading progress: %w", err)
			}
			return fmt.Errorf("reading progress: %w: %w", errBroken, err)
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return errors.New(m.ErrorDetail.Message)
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
		if progress != nil {
			progress(m)
		}
	}
}

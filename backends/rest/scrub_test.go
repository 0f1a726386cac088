package rest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/csi-gateway/csi-gateway/backends"
)

// exactScrubber removes the forms a secret has in the appliance's body exactly as they are
// (as redact.Scrubber does, with the value and its JSON escape), in no cleaned form: it finds
// the secret only if the backend scrubs before it reformats the appliance's words.
type exactScrubber []string

func (s exactScrubber) Scrub(text string) string {
	for _, form := range s {
		text = strings.ReplaceAll(text, form, "***")
	}
	return text
}

// TestAppliancesWordsScrubbedFirst: the appliance echoes a secret holding a tab and a
// newline; the backend scrubs the call's secrets from the body before it cleans it (which
// would turn them into spaces, a form the exact value no longer matches), in every kind of
// error body.
func TestAppliancesWordsScrubbedFirst(t *testing.T) {
	const secret = "s3cr3t\twith-tab\n"
	for _, tc := range []struct{ name, ct, body string }{
		{"plain text", "text/plain", "login with password=" + secret + " refused"},
		{"connect json", "application/json", `{"code":"permission_denied","message":"login with password=s3cr3t\twith-tab\n refused"}`},
		{"html title", "text/html", "<html><title>login with password=" + secret + " refused</title></html>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, reply(http.StatusForbidden, tc.ct, tc.body))
			b := newBackend(t, Config{}, s.URL)
			ctx, ci := callContext(t)
			ci.SetScrubber(exactScrubber{secret, `s3cr3t\twith-tab\n`})
			_, err := b.Unary(ctx, createPath, createRequest(t))
			e := checkError(t, err, backends.ClassPermission, "login with password=***")
			if strings.Contains(e.Message, "with-tab") {
				t.Errorf("message %q holds the secret", e.Message)
			}
		})
	}
}

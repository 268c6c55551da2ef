package compattests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// TestConsoleBrowserLogin is TestConsoleBrowser's auth-on run (issue 16
// with issue 12): with http-auth required the console shows its login
// form; a wrong password is refused on the form; the right one shows the
// pages with the user's principal; the session cookie is not readable by
// scripts (HttpOnly); a 401 in the middle of a session (the cookie gone)
// brings the form back, and so does logging out.
func TestConsoleBrowserLogin(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "admin.password")
	if err := os.WriteFile(pw, []byte(adminPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t, withArgs("--http-auth", "required", "--connection-failed-authentication-delay", "10ms",
		"--sasl-bootstrap-user", adminUser, "--sasl-bootstrap-password-file", pw))
	if status, _, _, raw := httpCall(t, "PUT", "http://"+b.HTTPAddr()+"/v1/queues/login-queue", `{}`, basic(adminUser, adminPassword)); status != 201 {
		t.Fatalf("create queue: %d %s", status, raw)
	}
	br := newConsoleBrowser(t, b.HTTPAddr())
	// A failed load of a 401 answer is logged by the browser: expected.
	const expected401 = "401"

	br.run("open the console", chromedp.Navigate(br.base+"#/queues"),
		chromedp.WaitVisible(`#login-form`, chromedp.ByQuery))
	br.screenshot("login")
	br.checkClean("login", expected401)

	login := func(password string) {
		br.run("log in",
			chromedp.SetValue(`#login-user`, adminUser, chromedp.ByQuery),
			chromedp.SetValue(`#login-password`, password, chromedp.ByQuery),
			chromedp.Click(`#login-submit`, chromedp.ByQuery))
	}
	login("wrong")
	br.run("wait for the refusal", chromedp.WaitVisible(`//form[@id="login-form"]//div[@role="alert"][contains(., "unauthorized")]`, chromedp.BySearch))
	br.checkClean("login refused", expected401)

	login(adminPassword)
	br.run("wait for the queues page", chromedp.WaitVisible(`main > div[data-page="queues"][data-loaded="true"] table`, chromedp.ByQuery))
	if got := br.text("main"); !strings.Contains(got, "login-queue") {
		t.Errorf("the queues page after login does not show the queue:\n%.1000s", got)
	}
	if who := br.text("#principal"); who != "User:"+adminUser {
		t.Errorf("the header shows %q, want User:%s", who, adminUser)
	}
	br.screenshot("logged-in")
	br.open("topics", "table")
	var cookies string
	br.run("read document.cookie", chromedp.Evaluate(`document.cookie`, &cookies))
	if strings.Contains(cookies, "broker_session") {
		t.Errorf("a script can read the session cookie: %q", cookies)
	}
	br.checkClean("after login")

	// The session ends under the console (here: the cookie is gone); the
	// next call's 401 shows the form again, and a login resumes.
	br.run("drop the cookie", network.ClearBrowserCookies())
	br.run("navigate", chromedp.Navigate(br.base+"#/groups"), chromedp.WaitVisible(`#login-form`, chromedp.ByQuery))
	login(adminPassword)
	br.run("wait for the groups page", chromedp.WaitVisible(`main > div[data-page="groups"][data-loaded="true"]`, chromedp.ByQuery))
	br.checkClean("session ended", expected401)

	br.run("log out", chromedp.Click(`#logout`, chromedp.ByQuery), chromedp.WaitVisible(`#login-form`, chromedp.ByQuery))
	br.run("reload", chromedp.Navigate(br.base+"#/overview"), chromedp.Reload(), chromedp.WaitVisible(`#login-form`, chromedp.ByQuery))
	br.checkClean("logged out", expected401)
}

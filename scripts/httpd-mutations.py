#!/usr/bin/env python3
# scripts/httpd-mutations.py [NAME...]: turns each of internal/httpd's checks off in
# turn (one source edit each, put back after) and runs the tests that must catch
# it; prints FAILS (caught) or PASSES(!) (a check no test sees). Run from anywhere.
# Each check turned off in turn: the named tests must fail, and pass again after.
import subprocess, sys, re
import os
root=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')+'/'
M=[
 # (name, file, old, new, test regexp)
 ("two Content-Length", "internal/httpd/parse.go", "\tcase 1:\n\t\tv := cl[0]", "\tcase 1, 2:\n\t\tv := cl[0]", "TestRefusals/two_Content-Length$"),
 ("Content-Length digits", "internal/httpd/parse.go", 'len(v) > 18 || strings.TrimLeft(v, "0123456789") != ""', 'len(v) > 18', "TestRefusals/Content-Length_(list|sign|negative)$"),
 ("Content-Length too long", "internal/httpd/parse.go", 'v == "" || len(v) > 18 ||', 'v == "" ||', "TestRefusals/Content-Length_huge$"),
 ("CL and TE", "internal/httpd/parse.go", "\t\tif len(cl) > 0 {", "\t\tif false && len(cl) > 0 {", "TestRefusals/Content-Length_and_Transfer-Encoding$"),
 ("chunked 411", "internal/httpd/parse.go", 'if last == "chunked" && len(codings) == 1 {', 'if last == "" && false {', "TestRefusals/chunked_body$"),
 ("other coding 501", "internal/httpd/parse.go", '\t\treturn refuse(StatusNotImplemented, "Transfer-Encoding', '\t\treturn nil\n\t\t_ = refuse(StatusNotImplemented, "Transfer-Encoding', "TestRefusals/other_coding$"),
 ("TE in 1.0", "internal/httpd/parse.go", "\t\tif r.ProtoMinor == 0 {\n\t\t\treturn refuse(StatusBadRequest, \"Transfer-Encoding in", "\t\tif false {\n\t\t\treturn refuse(StatusBadRequest, \"Transfer-Encoding in", "TestRefusals/Transfer-Encoding_in_1.0$"),
 ("body cap", "internal/httpd/parse.go", "if n > lim.Body {", "if false {", "TestRefusals/body_over_the_cap$"),
 ("obs-fold", "internal/httpd/parse.go", "if l[0] == ' ' || l[0] == '\\t' {", "if false {", "TestRefusals/obs-fold"),
 ("bare CR", "internal/httpd/parse.go", "\t\t\tif c == '\\r' {", "\t\t\tif c == '\\r' && false {", "TestRefusals/bare_CR"),
 ("bare LF", "internal/httpd/parse.go", '\t\t\treturn nil, refuse(StatusBadRequest, "%s ends in a bare LF (lines end in CRLF)", what)', "\t\t\tfrag = append(frag[:n-1:n-1], '\\r', '\\n')\n\t\t\tn++", "TestRefusals/bare_LF"),
 ("field name token", "internal/httpd/parse.go", "\tif !isToken(name) {", "\tif false {", "TestRefusals/(space_before_colon|bad_name_byte)$"),
 ("empty name", "internal/httpd/parse.go", '\tif name == "" {', "\tif false {", "TestRefusals/empty_name$"),
 ("no colon", "internal/httpd/parse.go", "\tif colon < 0 {\n", "\tif colon < 0 {\n\t\tcolon = len(l)\n\t}\n\tif false {\n", "TestRefusals/no_colon$"),
 ("control bytes", "internal/httpd/parse.go", "if c < ' ' && c != '\\t' || c == 0x7f {", "if false {", "TestRefusals/(NUL|DEL)_in_a_value$"),
 ("Host required", "internal/httpd/parse.go", "if len(hosts) == 0 && r.ProtoMinor == 1 {", "if false {", "TestRefusals/no_Host$"),
 ("one Host", "internal/httpd/parse.go", "\tif len(hosts) > 1 {", "\tif false {", "TestRefusals/two_Hosts$"),
 ("Host syntax", "internal/httpd/parse.go", "\t\tif !validHost(hosts[0]) {", "\t\tif false {", "TestRefusals/(bad_Host|Host_with_a_slash)$"),
 ("absolute form host", "internal/httpd/parse.go", 'if len(r.Header.Values("Host")) == 1 && !strings.EqualFold(r.Host, auth) {', "if false {", "TestRefusals/absolute_form,_other_host$"),
 ("absolute form https", "internal/httpd/parse.go", '!(secure && strings.EqualFold(scheme, "https"))', '!strings.EqualFold(scheme, "https")', "TestRefusals/absolute_form,_https_on_plain$"),
 ("absolute form scheme", "internal/httpd/parse.go", 'if !strings.EqualFold(scheme, "http") && !(secure', 'if false && !(secure', "TestRefusals/absolute_form,_other_scheme$"),
 ("absolute form authority", "internal/httpd/parse.go", "\t\tif !validHost(auth) {", "\t\tif auth == \"\" {", "TestRefusals/absolute_form,_user_info$"),
 ("relative target", "internal/httpd/parse.go", "\t\tif !ok {\n\t\t\treturn refuse(StatusBadRequest, \"target %q: want a path", "\t\tif !ok && false {\n\t\t\treturn refuse(StatusBadRequest, \"target %q: want a path", "TestRefusals/relative_target$"),
 ("network path", "internal/httpd/parse.go", 'if strings.HasPrefix(t, "//") {', "if false {", "TestRefusals/network-path_target$"),
 ("target bytes", "internal/httpd/parse.go", "c <= ' ' || c >= 0x7f || c == '#' {", "c <= ' ' {", "TestRefusals/(fragment|non-ASCII_target)$"),
 ("asterisk", "internal/httpd/parse.go", 'case t == "*":', 'case t == "*" && false:', "TestRefusals/asterisk$"),
 ("CONNECT", "internal/httpd/parse.go", 'case r.Method == "CONNECT":', 'case r.Method == "CONNECT" && false:', "TestRefusals/CONNECT$"),
 ("request line shape", "internal/httpd/parse.go", 'if !ok1 || !ok2 || strings.Contains(proto, " ") {', "if !ok1 || !ok2 {", "TestRefusals/two_spaces$"),
 ("method token", "internal/httpd/parse.go", 'if method == "" || !isToken(method) {', "if false {", "TestRefusals/bad_method$"),
 ("505", "internal/httpd/parse.go", "if len(proto) == 8 && strings", "if false && len(proto) == 8 && strings", "TestRefusals/HTTP/1.2$"),
 ("exact version", "internal/httpd/parse.go", '\tcase "HTTP/1.1":\n', '\tcase "HTTP/1.1", "http/1.1":\n', "TestRefusals/lower-case_version$"),
 ("empty lines", "internal/httpd/parse.go", "if empty >= maxEmptyLines {", "if false {", "TestRefusals/empty_lines$"),
 ("414", "internal/httpd/parse.go", '\t\tl, err := lr.line("the request line")\n\t\tif err == errTooLong {', '\t\tl, err := lr.line("the request line")\n\t\tif false {', "TestRefusals/long_request_line$"),
 ("431 bytes", "internal/httpd/parse.go", '\t\tl, err := lr.line("a header line")\n\t\tif err == errTooLong {', '\t\tl, err := lr.line("a header line")\n\t\tif false {', "TestRefusals/long_header$"),
 ("431 fields", "internal/httpd/parse.go", "if n >= lim.Fields {", "if false {", "TestRefusals/many_fields$"),
 ("417", "internal/httpd/parse.go", 'if len(exp) > 1 || !strings.EqualFold(exp[0], "100-continue") {', "if false {", "TestRefusals/unknown_expectation$"),
 ("close after refusal", "internal/httpd/server.go", "\t\t\tc.refuse(re)\n\t\t}\n\t\treturn false", "\t\t\tc.refuse(re)\n\t\t\treturn true\n\t\t}\n\t\treturn false", "TestRefusals/chunked_body$"),
 ("request cap", "internal/httpd/server.go", "\tif maxReq <= 0 {\n", "\tif true {\n", "TestKeepAlive$"),
 ("read timeout", "internal/httpd/server.go", "\t\tc.nc.SetReadDeadline(start.Add(s.ReadTimeout))", "\t\tc.nc.SetReadDeadline(time.Time{})", "TestTimeouts$"),
 ("read header timeout", "internal/httpd/server.go", "\t\tc.nc.SetReadDeadline(start.Add(hd))", "\t\tc.nc.SetReadDeadline(time.Time{})", "TestTimeouts$"),
 ("idle timeout", "internal/httpd/server.go", "c.nc.SetReadDeadline(deadline(s.IdleTimeout))", "c.nc.SetReadDeadline(time.Time{})", "TestTimeouts$"),
 ("write timeout", "internal/httpd/server.go", "\t}\n\tc.nc.SetWriteDeadline(deadline(s.WriteTimeout))\n\treq.RemoteAddr", "\t}\n\treq.RemoteAddr", "TestTimeouts$"),
 ("100 continue", "internal/httpd/server.go", '\t\tio.WriteString(b.c.bw, "HTTP/1.1 100 Continue\\r\\n\\r\\n")\n', "", "TestExpectContinue$"),
 ("close without 100", "internal/httpd/server.go", "\t\tw.close = true // the client may or may not send the body now", "", "TestExpectContinue$"),
 ("drain body", "internal/httpd/server.go", "\tif b.left > 0 {\n\t\tif b.expect", "\tif false {\n\t\tif b.expect", "TestUnreadBody$"),
 ("HEAD no body", "internal/httpd/server.go", "\tif w.head {\n\t\treturn len(p), nil\n\t}\n", "", "TestResponses$"),
 ("chunked stream", "internal/httpd/server.go", "\tcase w.req.ProtoMinor == 1:\n\t\tw.chunked = true", "\tcase false:\n\t\tw.chunked = true", "TestResponses$"),
 ("short declared body closes", "internal/httpd/server.go", "\t\tw.close = true // the client waits for bytes that will not come", "", "TestResponses$"),
 ("header CRLF", "internal/httpd/server.go", "\t\t\tbw.WriteString(cleanValue(v))", "\t\t\tbw.WriteString(v)", "TestResponses$"),
 ("close on shutdown", "internal/httpd/server.go", ' || w.c.s.isClosing() {', ' {', "TestShutdown$"),
 ("panic 500", "internal/httpd/server.go", "\t\t\tif !w.wroteWire {\n\t\t\t\tw.header = Header{}", "\t\t\tif false {\n\t\t\t\tw.header = Header{}", "TestPanic$"),
 ("405 Allow", "internal/httpd/mux.go", '\t\tw.Header().Set("Allow", strings.Join(allow, ", "))\n', "", "TestMux$"),
 ("HEAD by GET", "internal/httpd/mux.go", 'if h == nil && r.Method == "HEAD" {', "if false {", "TestMux$"),
 ("cookie value check", "internal/httpd/cookie.go", "!isToken(c.Name) || !cookieValue(c.Value) ||", "!isToken(c.Name) ||", "TestCookies$"),
 ("cookie Max-Age=0", "internal/httpd/cookie.go", '\t\tb.WriteString("; Max-Age=0")\n', "", "TestCookies$"),
]
only=sys.argv[1:]
bad=0
for name,f,old,new,test in M:
    if only and name not in only: continue
    p=root+f; src=open(p).read()
    if src.count(old)!=1:
        print(f"SKIP {name}: pattern found {src.count(old)} times"); bad+=1; continue
    open(p,'w').write(src.replace(old,new))
    try:
        r=subprocess.run(['go','test','-count=1','-run',test,'./internal/httpd/'],cwd=root,capture_output=True,text=True,timeout=120)
        out=r.stdout+r.stderr
    except subprocess.TimeoutExpired:
        out='timeout'; r=None
    finally:
        open(p,'w').write(src)
    failed = r is None or r.returncode!=0
    lines=[l.strip() for l in out.splitlines() if l.strip().startswith('--- FAIL')]
    print(("FAILS " if failed else "PASSES(!) ")+name+": "+(" ".join(lines[:3]) if lines else out.strip().splitlines()[-1] if out.strip() else ''))
    if not failed: bad+=1
print("mutations not caught:",bad)

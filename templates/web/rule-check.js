// The live check of the rule fields (input[data-check]) on the manage and sign-up pages:
// each is sent to /rules/check as it is typed; the server checks again on submit.
// Served as a file (bot/pages.py), never inline: the pages' policy runs no inline script.
(function () {
  var fields = document.querySelectorAll("input[data-check]");
  fields.forEach(function (field) {
    var out = document.getElementById(field.getAttribute("data-check"));
    var timer = null;
    field.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () {
        if (!field.value.trim()) { out.textContent = ""; out.className = "check"; field.removeAttribute("aria-invalid"); return; }
        var body = new URLSearchParams({ rule: field.value });
        fetch("/rules/check", { method: "POST", body: body, credentials: "same-origin" })
          .then(function (r) { return r.json().then(function (answer) { answer.status = r.status; return answer; }); })
          .then(function (answer) {
            if (answer.status === 429) {
              // Throttled: say so, but the rule itself is not known to be wrong.
              out.textContent = answer.message;
              out.className = "check";
              field.removeAttribute("aria-invalid");
            } else if (answer.ok) {
              out.textContent = "\u2713 The rule is valid.";
              out.className = "check good";
              field.removeAttribute("aria-invalid");
            } else {
              var where = answer.column ? " at column " + answer.column : "";
              out.textContent = "\u26a0 " + answer.message + where;
              if (answer.column) {
                var pre = document.createElement("pre");
                pre.textContent = field.value + "\n" + " ".repeat(answer.column - 1) + "^";
                out.appendChild(pre);
              }
              out.className = "check bad";
              field.setAttribute("aria-invalid", "true");
            }
          })
          .catch(function () { out.textContent = ""; });
      }, 250);
    });
  });
})();

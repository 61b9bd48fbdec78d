// Small behaviours of every dashboard page, no framework: copy buttons, auto-submitting pickers,
// and the live update of the message list (polls its own rows while on the first page).
'use strict';
(function () {
  function copy(text, button) {
    if (!navigator.clipboard) return;
    navigator.clipboard.writeText(text).then(function () {
      var was = button.textContent;
      button.textContent = 'Copied';
      setTimeout(function () { button.textContent = was; }, 1500);
    });
  }
  document.addEventListener('click', function (event) {
    var button = event.target.closest && event.target.closest('button.copy');
    if (!button) return;
    var from = button.getAttribute('data-copy-from');
    var text = from ? document.getElementById(from).value : button.getAttribute('data-copy');
    if (text !== null) copy(text, button);
  });
  document.querySelectorAll('select[data-autosubmit]').forEach(function (select) {
    select.addEventListener('change', function () { select.form.submit(); });
  });
  var live = document.querySelector('tbody[data-live]');
  if (live) {
    var url = live.getAttribute('data-live');
    var timer = setInterval(function () {
      if (document.hidden) return;
      fetch(url, { credentials: 'same-origin', headers: { accept: 'text/html' } })
        .then(function (res) {
          if (!res.ok) { clearInterval(timer); return null; }
          return res.text();
        })
        .then(function (rows) {
          // The rows are HTML the server escaped (dashboard/html.ts), like the page itself.
          if (rows !== null && rows !== live.innerHTML) live.innerHTML = rows;
        })
        .catch(function () {});
    }, 5000);
  }
})();

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
  // Keyboard focus inside the rows survives their replacement: the same row (by its data-key, the
  // message's id) and the same element in it get it back, wherever new rows put that row.
  function focusables(row) {
    return Array.prototype.slice.call(row.querySelectorAll('a[href], button, input, select, textarea, [tabindex]'));
  }
  function focusedInRows() {
    var el = document.activeElement;
    if (!el || !live.contains(el)) return null;
    var row = el.closest('tr[data-key]');
    return row ? { key: row.getAttribute('data-key'), index: focusables(row).indexOf(el) } : null;
  }
  function refocus(kept) {
    var rows = live.querySelectorAll('tr[data-key]');
    for (var i = 0; i < rows.length; i++) {
      if (rows[i].getAttribute('data-key') !== kept.key) continue;
      var target = focusables(rows[i])[kept.index] || focusables(rows[i])[0];
      if (target) target.focus({ preventScroll: true });
      return;
    }
  }
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
          if (rows === null || rows === live.innerHTML) return;
          var kept = focusedInRows();
          live.innerHTML = rows;
          if (kept) refocus(kept);
        })
        .catch(function () {});
    }, 5000);
  }
})();

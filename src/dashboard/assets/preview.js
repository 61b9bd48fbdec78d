// The template editor's live preview: on every change (debounced) the form is posted into the
// sandboxed preview frame (the HTML part as sent) and, as JSON, for the subject, From, text part
// and the errors shown beside their fields. Both through the same operation as the API's
// preview_template.
'use strict';
(function () {
  var form = document.getElementById('template-form');
  if (!form) return;
  var button = document.getElementById('preview-button');
  var timer = null;
  function field(id, text) {
    var el = document.getElementById(id);
    if (el) el.textContent = text || '';
  }
  function refresh() {
    form.requestSubmit ? form.requestSubmit(button) : button.click();
    var body = new URLSearchParams(new FormData(form));
    fetch(form.getAttribute('data-preview-json'), { method: 'POST', credentials: 'same-origin', body: body })
      .then(function (res) { return res.ok ? res.json() : null; })
      .then(function (p) {
        if (!p) return;
        field('preview-subject', p.subject);
        field('preview-from', p.from);
        field('preview-text', p.text);
        form.querySelectorAll('.field-error').forEach(function (el) { el.textContent = ''; });
        Object.keys(p.errors || {}).forEach(function (name) { field('err-' + name, p.errors[name]); });
      })
      .catch(function () {});
  }
  form.addEventListener('input', function () {
    clearTimeout(timer);
    timer = setTimeout(refresh, 300);
  });
  refresh();
})();

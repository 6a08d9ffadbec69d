// Finance pages: the Print button opens the browser's print dialog (print CSS hides the chrome).
(function () {
  "use strict";
  document.querySelectorAll("[data-print]").forEach(function (button) {
    button.addEventListener("click", function () { window.print(); });
  });
})();

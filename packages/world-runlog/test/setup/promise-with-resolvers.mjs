// Node 20 lacks Promise.withResolvers (Node 22+); @workflow/world-testing's hooks test calls
// it in the test process. Defined only when missing, with the standard semantics.
if (typeof Promise.withResolvers !== 'function') {
  Object.defineProperty(Promise, 'withResolvers', {
    configurable: true,
    writable: true,
    value: function withResolvers() {
      let resolve;
      let reject;
      const promise = new this((res, rej) => {
        resolve = res;
        reject = rej;
      });
      return { promise, resolve, reject };
    },
  });
}

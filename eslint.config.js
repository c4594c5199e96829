import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'node_modules/',
      'generated/',
      'clients/typescript/generated/',
      'test/client-compat/',
      'data/',
      'console/dist/',
      'dist/',
      'artifacts/',
      'spec/',
      'eslint.config.js',
      '.dependency-cruiser.cjs',
    ],
  },
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  {
    // The service's own code runs on Node.js 20 (V8 11.3), where an object literal with any member
    // after a non-empty spread (`{ ...row, revision: 2 }`, `{ ...a, ...b }`), or a property added to
    // a spread's copy later, builds a new hidden class on every call: 1-8 us instead of ~0.1 us, and
    // each such class is old-space garbage (bench/FINDINGS.md, 2026-12-06). Write the members out, put
    // the spread last (`{ etag, ...extra }`), or use Object.assign({}, a, b) on objects that cannot
    // carry a `__proto__` key of their own (never on parsed request JSON).
    files: ['src/**/*.ts'],
    ignores: ['src/**/*.test.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: 'ObjectExpression > SpreadElement:not(:last-child)',
          message:
            'A member after a spread makes V8 (Node.js 20) build a new hidden class per call: write the members out, put the spread last, or Object.assign({}, a, b) (eslint.config.js).',
        },
      ],
    },
  },
);

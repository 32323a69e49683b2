import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  js.configs.recommended,
  ...tseslint.configs.strict,
  {
    files: ['src/**/*.ts'],
    rules: {
      eqeqeq: 'error',
      curly: 'error',
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
);
